"""Traces replay deterministically, tampering is caught, and check_env passes."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from benchmark import replay
from benchmark.env import make_env
from benchmark.tasks import task_registry
from benchmark.testing import EnvCheckError, check_env, check_observations_in_spaces, random_rollout

# The benchmark's own tasks (imported suites' tasks replay in their own tests).
NATIVE = sorted(t.id for t in task_registry().values() if t.source is None)


def _random_traces(count: int) -> list[dict]:
    traces = []
    tasks = NATIVE
    for k in range(count):
        task = task_registry()[tasks[k % len(tasks)]]
        n = 2 + k % 3
        env = make_env(task.id, n_agents=n, seed=k, comm=k % 2 == 0, message_cost=k % 3 == 2)
        traces.append(random_rollout(env, k, np.random.default_rng(k)))
    return traces


@pytest.fixture(scope="module")
def traces() -> list[dict]:
    return _random_traces(30)


def test_random_episodes_replay_to_the_same_checklist_and_hash(traces: list[dict]) -> None:
    assert len({t["config"]["task"] for t in traces}) == len(NATIVE)  # every task
    for trace in traces:
        result = replay(json.loads(json.dumps(trace)))
        assert result.ok, (trace["config"], result)
        assert result.satisfied == trace["final"]["satisfied"]


def test_a_tampered_trace_does_not_replay(traces: list[dict]) -> None:
    trace = next(t for t in traces if any(d["actions"] for d in t["decisions"]))
    forged = copy.deepcopy(trace)
    forged["final"]["satisfied"] = [True] * len(forged["final"]["satisfied"])
    assert not replay(forged).ok
    changed = copy.deepcopy(trace)
    first = changed["decisions"][0]["actions"]
    agent = next(iter(first))
    first[agent] = "done"
    assert not replay(changed).hash_matches


def test_a_non_trace_is_rejected() -> None:
    with pytest.raises(ValueError, match="missing key"):
        replay({"config": {}})


@pytest.mark.parametrize(
    ("task", "n", "options"),
    [
        ("transport_produce_fridge_v0", 2, {}),
        ("heavy_box_sofa_v0", 3, {"action_level": "primitive"}),
        ("search_phone_bedroom_v0", 4, {"comm": False}),
    ],
)
def test_check_env_passes(task: str, n: int, options: dict) -> None:
    check_env(lambda: make_env(task, n_agents=n, seed=0, **options))


def test_check_env_fails_loudly_on_an_observation_outside_its_space() -> None:
    env = make_env("transport_produce_fridge_v0", n_agents=2, seed=0)
    obs, _ = env.reset(seed=0)
    obs["agent_0"]["needs_decision"] = 7
    with pytest.raises(EnvCheckError, match="needs_decision"):
        check_observations_in_spaces(env, obs)
