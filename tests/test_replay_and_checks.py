"""Traces replay deterministically, tampering is caught, and check_env passes."""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pytest

from benchmark import replay
from benchmark.env import make_env
from benchmark.tasks.spec import task_registry
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


# One task of every family, as a user would build it.
FAMILY_TASKS = [
    "heavy_box_sofa_v0",
    "prepare_coffee_v0",
    "rearrange_bathroom_v0",
    "search_phone_bedroom_v0",
    "switch_off_kitchen_v0",
    "transport_produce_fridge_v0",
]


@pytest.mark.parametrize("task", FAMILY_TASKS)
def test_pettingzoo_own_tests_pass_on_the_unwrapped_env(task: str) -> None:
    """PettingZoo's parallel_api_test and parallel_seed_test on make_env's env itself. Its API
    test probes reset with a placeholder option: the env ignores it with a warning that names
    the valid options, and every other PettingZoo warning is an error here."""
    from pettingzoo.test import parallel_api_test, parallel_seed_test

    from benchmark.env.collab_env import UnknownOptionWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("always", UnknownOptionWarning)
        parallel_api_test(make_env(task, n_agents=2, seed=0), num_cycles=40)
        parallel_seed_test(lambda: make_env(task, n_agents=2, seed=0), num_cycles=20)


def test_an_unknown_reset_option_is_ignored_with_the_valid_ones_named() -> None:
    env = make_env("transport_produce_fridge_v0", n_agents=2, seed=0)
    with pytest.warns(UserWarning, match=r"unknown option\(s\) \['colour'\].*'comm'"):
        env.reset(seed=0, options={"colour": "red", "comm": False})
    assert env.options.comm is False  # the known option still applies
    with pytest.raises(ValueError, match="observability"):
        env.reset(seed=0, options={"observability": "sideways"})


def test_make_env_builds_no_episode_until_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    """Construct, then reset once (PettingZoo's convention): no episode is built twice."""
    from benchmark.env import collab_env

    built: list[int] = []
    real = collab_env.make_episode

    def counting(*args, **kwargs):
        built.append(args[3])  # the seed
        return real(*args, **kwargs)

    monkeypatch.setattr(collab_env, "make_episode", counting)
    env = make_env("transport_produce_fridge_v0", n_agents=2, seed=5)
    assert built == [] and env.agents == []
    with pytest.raises(RuntimeError, match="before the first reset"):
        env.step({})
    with pytest.raises(RuntimeError, match="before the first reset"):
        env.task_info()
    env.reset()
    assert built == [5] and env.agents == ["agent_0", "agent_1"]
    # A runner job builds its episode once.
    from benchmark.runner.jobs import Job, run_job

    built.clear()
    job = Job("transport_produce_fridge_v0", "test", 2, 1, True, "heuristic")
    result = run_job(job, retries=0)
    assert result["trace"] is not None, result["row"]
    assert built == [1]
