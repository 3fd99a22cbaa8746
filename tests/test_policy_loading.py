"""A committed policy is loaded once per process, also when the episodes of a batch build their
teams in threads at once (loading a model is not thread-safe: the episodes of a batched cross-play
run against the tiny policy all failed before the load was serialised)."""

from __future__ import annotations

import threading

from baselines.rl.core.policy_team import _cached_policy, shared_policy

TINY = "baselines/adapters/policy-tiny-families"


def test_teams_built_in_threads_at_once_share_one_loaded_policy() -> None:
    _cached_policy.cache_clear()
    loaded, errors = [], []

    def build() -> None:
        try:
            loaded.append(shared_policy(TINY))
        except Exception as err:
            errors.append(repr(err))

    threads = [threading.Thread(target=build) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(loaded) == 6 and len({id(p) for p in loaded}) == 1
    assert _cached_policy.cache_info().misses == 1
