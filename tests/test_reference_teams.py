"""The scripted reference teams: the oracle solves the suite, random does not, teams of two
are faster than one, and heavy lifting cannot be done alone."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from benchmark.agents import make_team, registered_teams
from benchmark.env import make_env
from benchmark.rollout import run_episode
from benchmark.tasks.spec import FAMILIES, task_registry

SEEDS = range(4)
# The benchmark's own tasks; imported suites' tasks (tasks/mapthor/) have their own tests.
NATIVE = [t for t in task_registry().values() if t.source is None]


def _run(task: str, n: int, team: str, seed: int, **options) -> dict:
    env = make_env(task, n_agents=n, seed=seed, **options)
    kwargs = {"seed": seed} if team == "random" else {}
    return run_episode(env, make_team(team, **kwargs), seed=seed)


@pytest.fixture(scope="module")
def oracle_results() -> dict[tuple[str, int], list[dict]]:
    out = collections.defaultdict(list)
    for task in NATIVE:
        for n in range(task.min_agents, min(task.max_agents, 4) + 1):
            for seed in SEEDS:
                out[(task.family, n)].append(_run(task.id, n, "oracle", seed, observability="full"))
    return out


def test_the_teams_are_registered() -> None:
    assert {"oracle", "random"} <= set(registered_teams())
    with pytest.raises(ValueError, match="registered teams"):
        make_team("telepath")


def test_oracle_solves_95_percent_of_every_family_for_every_agent_count(oracle_results) -> None:
    assert {family for family, _ in oracle_results} == set(FAMILIES)
    for (family, n), traces in oracle_results.items():
        sr = np.mean([t["final"]["success"] for t in traces])
        assert sr >= 0.95, f"{family} with {n} agents: SR {sr:.2f}"


def test_random_solves_far_fewer(oracle_results) -> None:
    random_sr = np.mean(
        [
            _run(task.id, max(2, task.min_agents), "random", seed)["final"]["success"]
            for task in NATIVE
            for seed in range(2)
        ]
    )
    oracle_sr = np.mean([t["final"]["success"] for ts in oracle_results.values() for t in ts])
    assert random_sr <= 0.2 and oracle_sr - random_sr >= 0.7


def test_two_oracle_agents_need_fewer_ticks_than_one_on_transport(oracle_results) -> None:
    one = np.mean([t["final"]["ticks"] for t in oracle_results[("transport", 1)]])
    two = np.mean([t["final"]["ticks"] for t in oracle_results[("transport", 2)]])
    assert two < one, (one, two)


def test_heavy_lift_is_impossible_alone() -> None:
    for task in (t for t in NATIVE if t.family == "heavy-lift"):
        trace = _run(task.id, 1, "oracle", 0, observability="full", strict_agents=False)
        assert not trace["final"]["success"]
        assert trace["final"]["ticks"] > 0
