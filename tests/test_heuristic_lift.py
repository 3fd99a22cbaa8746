"""The heuristic team lifts heavy objects together: a partner is recruited by message, the two
lift in the same tick and one of them carries the object; without communication the request
for help goes unanswered. Real env, real train-split scenes (the suite plays the test split)."""

from __future__ import annotations

from collections import Counter

import pytest

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.rollout import run_episode
from benchmark.tasks.spec import task_registry

HEAVY = sorted(t.id for t in task_registry().values() if t.family == "heavy-lift")


def _play(task: str, scene: str, n_agents: int, seed: int, comm: bool = True) -> dict:
    env = make_env(task, scene=scene, n_agents=n_agents, seed=seed, comm=comm)
    return run_episode(env, make_team("heuristic"), seed=seed)


def _said(trace: dict, text: str) -> list[dict]:
    return [m for m in trace["messages"] if m["text"] == text]


@pytest.fixture(scope="module")
def laptop_episodes() -> dict[bool, dict]:
    """A laptop to put on the sofa, two agents, with and without communication."""
    return {
        comm: _play("heavy_laptop_sofa_v0", "FloorPlan209", 2, 0, comm) for comm in (True, False)
    }


def test_two_agents_recruited_by_message_lift_and_deliver_a_heavy_object(laptop_episodes) -> None:
    trace = laptop_episodes[True]
    assert all(trace["final"]["satisfied"]), trace["final"]
    laptop = trace["checklist"][0]["subject"]
    on_laptop = [s for s in trace["skills"] if s["target"] == laptop]
    first = on_laptop[0]
    assert (first["skill"], first["reason"]) == ("pickup", "too_heavy"), "learnt by failing"
    leader = first["agent"]
    (helper,) = {"agent_0", "agent_1"} - {leader}
    (request,) = _said(trace, f"help lift {laptop}")
    (answer,) = _said(trace, f"coming {laptop}")
    assert (request["sender"], answer["sender"]) == (leader, helper)
    assert request["tick"] <= answer["tick"]
    assert {m["sender"] for m in _said(trace, f"ready {laptop}")} == {leader, helper}
    assert all(m["delivered"] for m in trace["messages"])
    lifted = [s for s in on_laptop if s["skill"] == "lift" and s["success"]]
    assert {s["agent"] for s in lifted} == {leader, helper}
    assert len({s["tick"] for s in lifted}) == 1, "the two lifts met in one tick"
    assert not any(s["skill"] == "pickup" and s["success"] for s in on_laptop)
    assert any(s["skill"] == "put" and s["success"] for s in trace["skills"])


def test_without_communication_the_request_for_help_is_never_answered(laptop_episodes) -> None:
    trace = laptop_episodes[False]
    requests = [m for m in trace["messages"] if m["text"].startswith("help lift ")]
    assert requests, "the agent that found the laptop heavy still asks"
    assert not any(m["delivered"] for m in trace["messages"])
    assert not any(m["text"].startswith("coming ") for m in trace["messages"])
    lifts = [s for s in trace["skills"] if s["skill"] == "lift"]
    assert lifts and not any(s["success"] for s in lifts)
    assert {s["reason"] for s in lifts} == {"needs_partner"}


def test_with_three_agents_only_two_work_on_a_heavy_object() -> None:
    # Two teammates answer the request in the same tick: the higher index stands down.
    trace = _play("heavy_box_sofa_v0", "FloorPlan209", 3, 2)
    assert all(trace["final"]["satisfied"])
    box = trace["checklist"][0]["subject"]
    (request,) = _said(trace, f"help lift {box}")
    answers = _said(trace, f"coming {box}")
    assert sorted(m["sender"] for m in answers) == ["agent_1", "agent_2"]
    assert len({m["tick"] for m in answers}) == 1
    lifters = {s["agent"] for s in trace["skills"] if s["skill"] == "lift" and s["target"] == box}
    assert lifters == {request["sender"], "agent_1"}


@pytest.mark.parametrize("n_agents", [3, 4])
def test_no_heavy_object_is_ever_lifted_by_more_than_two(n_agents: int) -> None:
    lifted = 0
    for task in HEAVY:
        for seed in range(3):
            env = make_env(task, n_agents=n_agents, seed=seed, split="train")
            trace = run_episode(env, make_team("heuristic"), seed=seed)
            per_tick = Counter(
                (s["tick"], s["target"]) for s in trace["skills"] if s["skill"] == "lift"
            )
            assert max(per_tick.values(), default=0) <= 2, (task, seed, per_tick.most_common(1))
            lifted += sum(1 for s in trace["skills"] if s["skill"] == "lift" and s["success"])
    assert lifted >= 2 * len(HEAVY), "the teams did lift (two successful lifts per lift)"


def test_communication_solves_more_heavy_lift_episodes() -> None:
    solved = Counter()
    for task in HEAVY:
        for seed in range(4):
            for comm in (True, False):
                env = make_env(task, n_agents=2, seed=seed, comm=comm, split="train")
                trace = run_episode(env, make_team("heuristic"), seed=seed)
                solved[comm] += all(trace["final"]["satisfied"])
    assert solved[True] >= 12, solved
    assert solved[True] >= solved[False] + 6, solved
