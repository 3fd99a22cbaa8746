"""``check_env``: strict compliance checks for a ``CollabEnv`` that fail loudly.

It runs PettingZoo's ``parallel_api_test`` and ``parallel_seed_test`` and adds its own checks,
each a small function that raises ``EnvCheckError``: every observation lies in its space,
seeding is deterministic (same seed and actions, same trace hash), reset options are honoured
and unknown ones ignored with a warning naming the valid ones, and the trace is valid JSON that
replays to the same checklist and hash. PettingZoo's tests run on the environment itself, as a
user calls them.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from pettingzoo.test import parallel_api_test, parallel_seed_test

from benchmark.env.collab_env import CollabEnv, UnknownOptionWarning
from benchmark.env.replay import replay
from benchmark.env.trace import trace_hash


class EnvCheckError(AssertionError):
    """An environment failed a compliance check."""


PETTINGZOO_PROBE = {"options": 1}  # what parallel_api_test passes to check reset's signature


def check_reset_options(env: CollabEnv) -> None:
    """Reset options override one episode's env options; unknown ones are ignored with an
    :class:`UnknownOptionWarning` naming the valid ones."""
    flipped = not env.base_options.comm
    env.reset(seed=0, options={"comm": flipped})
    if env.options.comm != flipped or env.recorder.trace["config"]["options"]["comm"] != flipped:
        raise EnvCheckError("reset(options={'comm': ...}) did not reach the episode")
    env.reset(seed=0)
    if env.options != env.base_options:
        raise EnvCheckError("reset options outlived their episode")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env.reset(seed=0, options=PETTINGZOO_PROBE)
    said = [str(w.message) for w in caught if issubclass(w.category, UnknownOptionWarning)]
    if not said or "options" not in said[0] or "comm" not in said[0]:
        raise EnvCheckError(f"an unknown reset option was not reported with the valid ones: {said}")
    if env.options != env.base_options:
        raise EnvCheckError("an unknown reset option changed the episode's options")


def check_observations_in_spaces(env: CollabEnv, observations: dict[str, Any]) -> None:
    for agent, obs in observations.items():
        space = env.observation_space(agent)
        if not space.contains(obs):
            bad = [k for k, sub in space.spaces.items() if not sub.contains(obs.get(k))]
            raise EnvCheckError(f"{agent}'s observation is outside its space (fields {bad})")


def random_rollout(env: CollabEnv, seed: int, rng: np.random.Generator) -> dict[str, Any]:
    """Play random text actions (half valid skills on visible objects, half garbage) until the
    episode ends, checking every observation; returns the trace."""
    obs, _ = env.reset(seed=seed)
    check_observations_in_spaces(env, obs)
    for k, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed * 100 + k)
    infos: dict[str, Any] = {}
    while env.agents:
        actions = {}
        for agent in env.agents:
            seen = [o["objectId"] for o in obs[agent]["visible"]]
            if rng.random() < 0.5 and seen:
                skill = ("navigate", "pickup", "put", "open", "toggle_on")[int(rng.integers(5))]
                actions[agent] = f"{skill} {seen[int(rng.integers(len(seen)))]}"
            elif rng.random() < 0.5:
                actions[agent] = ("explore", "wait", "explore | say all: over here")[
                    int(rng.integers(3))
                ]
            else:
                actions[agent] = env.action_space(agent).sample()
        obs, _, _, _, infos = env.step(actions)
        check_observations_in_spaces(env, obs)
    return next(iter(infos.values()))["trace"]


def check_seeding(make: Callable[[], CollabEnv], seed: int = 3) -> None:
    hashes = [
        random_rollout(make(), seed, np.random.default_rng(seed))["trace_hash"] for _ in range(2)
    ]
    if hashes[0] != hashes[1]:
        raise EnvCheckError(f"same seed and actions gave different traces: {hashes}")


def check_trace(trace: dict[str, Any]) -> None:
    try:
        text = json.dumps(trace)
    except (TypeError, ValueError) as err:
        raise EnvCheckError(f"the trace is not JSON-serialisable: {err}") from err
    again = json.loads(text)
    if trace_hash(again) != trace["trace_hash"]:
        raise EnvCheckError("the trace hash does not match the trace's content")
    result = replay(again)
    if not result.ok:
        raise EnvCheckError(f"replay differs from the trace: {result}")


def check_env(make: Callable[[], CollabEnv], api_cycles: int = 60, seed_cycles: int = 30) -> None:
    """Run every check on environments built by ``make`` (called several times).

    Raises:
        EnvCheckError (an AssertionError) naming the first failed check.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PettingZoo reports some violations only as warnings
        # ... except the env's own note on PettingZoo's placeholder reset option, which a user
        # running parallel_api_test sees printed too.
        warnings.simplefilter("default", UnknownOptionWarning)
        try:
            parallel_api_test(make(), num_cycles=api_cycles)
            parallel_seed_test(make, num_cycles=seed_cycles)
        except (AssertionError, UserWarning) as err:
            raise EnvCheckError(f"PettingZoo API check failed: {err}") from err
    check_seeding(make)
    check_reset_options(make())
    env = make()
    check_trace(random_rollout(env, 1, np.random.default_rng(1)))
