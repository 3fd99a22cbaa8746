"""What teams get and give: the Team interface with its optional hooks, the public TaskInfo,
the read-only privileged view, and teams that never retry an action that cannot work."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from benchmark.agents import Team, make_team, team_class
from benchmark.env import make_env
from benchmark.env.views import TaskInfo
from benchmark.rollout import run_episode

TRANSPORT = "transport_produce_fridge_v0"


class _Recorder(Team):
    """A test double: waits, then says done, and keeps every hook call."""

    def __init__(self) -> None:
        self.rewards: list[dict[str, float]] = []
        self.closed = False

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.info = task_info
        self.steps = 0

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        self.steps += 1
        verb = "done" if self.steps > 2 else "wait"
        return {a: verb for a, o in observations.items() if o["needs_decision"]}

    def rewarded(self, rewards: dict[str, float]) -> None:
        self.rewards.append(rewards)


def test_the_episode_loop_calls_the_reward_hook_after_every_step() -> None:
    team = _Recorder()
    trace = run_episode(make_env(TRANSPORT, n_agents=2, seed=0), team, seed=0)
    assert len(team.rewards) == len(trace["decisions"]) == 3
    assert all(set(r) == {"agent_0", "agent_1"} for r in team.rewards)
    assert team.metrics() == {} and team.plan() is None, "the optional hooks' defaults"


@pytest.mark.parametrize("name", ["heuristic", "random", "oracle"])
def test_a_team_that_says_it_is_deterministic_plays_an_episode_again_to_the_same_trace(
    name: str,
) -> None:
    assert team_class(name).deterministic
    options = {"observability": "full"} if name == "oracle" else {}
    hashes = {
        run_episode(make_env(TRANSPORT, n_agents=2, seed=3, **options), make_team(name), seed=3)[
            "trace_hash"
        ]
        for _ in range(2)
    }
    assert len(hashes) == 1
    assert not team_class("llm_agents").deterministic, "an LLM team samples"


def test_make_team_refuses_a_class_that_is_not_a_team() -> None:
    with pytest.raises(ValueError, match=r"not a subclass of benchmark\.agents\.Team"):
        make_team("benchmark.env.views:TaskInfo")
    with pytest.raises(ValueError, match="registered teams"):
        make_team("no_such_team")


def test_task_info_is_public_and_frozen() -> None:
    env = make_env("transport_dishes_sink_v0", n_agents=2, seed=0)
    env.reset()
    info = env.task_info()
    assert info.agents == ("agent_0", "agent_1") and info.n_agents == 2
    assert info.cannot == {"agent_0": (), "agent_1": ("close", "open")}
    assert info.goal and all(":" in clause for clause in info.goal)
    assert info.privileged is None, "partial observability gets no privileged view"
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.instruction = "something else"  # type: ignore[misc]


def test_the_privileged_view_is_live_and_its_world_is_a_copy() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0, observability="full")
    env.reset()
    view = env.task_info().privileged
    assert view is not None and list(view.checklist) == env.episode.checklist
    assert view.heavy == env.episode.heavy and view.cannot == (frozenset(), frozenset())
    world = view.world()
    index = world.index_of[view.checklist[0].subject]
    world.update(index, parent=-1, holder=0)  # changing the copy ...
    assert env.world.objs[index].holder == -1, "... changes nothing in the episode"
    before = view.world()
    env.step({"agent_0": "wait", "agent_1": "wait"})
    assert view.world() is not before, "a new snapshot once the tick has moved"
    assert view.satisfied() == tuple(env.satisfied)


def test_the_oracle_gives_up_an_atom_after_a_failure_that_cannot_change() -> None:
    env = make_env(TRANSPORT, n_agents=1, seed=0, observability="full")
    env.reset()
    subject = env.episode.checklist[0].subject
    index = env.world.index_of[subject]
    # The apple can no longer be picked up: every pickup fails with a permanent reason.
    specs = list(env.world.specs)
    specs[index] = dataclasses.replace(specs[index], pickupable=False)
    env.world.specs = tuple(specs)
    team = make_team("oracle")
    team.reset(list(env.possible_agents), env.task_info())  # no env reset: keep the edit
    obs = {"agent_0": {"needs_decision": 1, "last_success": 1, "failure": {}}}
    infos: dict = {}
    while env.agents:
        obs, _, _, _, infos = env.step(team.act(obs))
    trace = infos["agent_0"]["trace"]
    pickups = [s for s in trace["skills"] if s["skill"] == "pickup" and s["target"] == subject]
    assert len(pickups) == 1 and pickups[0]["reason"] == "not_pickupable"
    assert trace["final"]["satisfied"][0] is False


def _obs(tick: int, visible: list[dict], success: bool = True, failure: dict | None = None) -> dict:
    return {
        "tick": tick,
        "needs_decision": 1,
        "visible": visible,
        "holding": "",
        "messages": (),
        "last_success": int(success),
        "feedback": "" if success else "failed",
        "failure": failure or {"reason": "", "permanent": 0, "agent": ""},
    }


def test_the_heuristic_never_repeats_an_action_that_cannot_work() -> None:
    from baselines.heuristic import HeuristicAgent
    from benchmark.tasks.goals import parse_clause

    apple = "Apple|-00.47|+01.15|+00.48"
    seen = [{"objectId": apple, "objectType": "Apple", "state": "", "in": ""}]
    agent = HeuristicAgent("agent_0", [parse_clause("all: inside(Apple, Fridge)")], ["agent_0"])
    first = _obs(0, seen)
    agent.observe(first)
    assert agent.decide(first).startswith(f"pickup {apple}")
    failed = _obs(1, seen, False, {"reason": "not_pickupable", "permanent": 1, "agent": ""})
    agent.observe(failed)
    assert not agent.decide(failed).startswith(f"pickup {apple}")
    transient = _obs(2, seen, False, {"reason": "held_by_other", "permanent": 0, "agent": "x"})
    fresh = HeuristicAgent("agent_0", [parse_clause("all: inside(Apple, Fridge)")], ["agent_0"])
    fresh.observe(first)
    fresh.decide(first)
    fresh.observe(transient)
    held = "a held object is left to its holder, named structurally"
    assert fresh.memory.claims[apple] == "x", held
