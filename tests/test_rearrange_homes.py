"""Rearrangement: observations show, on each visible receptacle, the goal objects that belong in
it and are elsewhere now (only for tasks with ``@home`` clauses), and the decentralised
heuristic learns homes from them or from its teammates' messages and carries objects back."""

from __future__ import annotations

from typing import Any

from baselines.heuristic import HeuristicTeam
from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.env.collab_env import CollabEnv
from benchmark.rollout import run_episode
from benchmark.tasks.goals import holds
from benchmark.tasks.spec import task_registry
from benchmark.testing import check_env

REARRANGE = sorted(t.id for t in task_registry().values() if t.family == "rearrange")


def _expected_belongs(env: CollabEnv) -> dict[str, list[str]]:
    """Receptacle -> the goal objects whose home it is and that are not there now, by the
    scoring function (an oracle independent of how the observation computes it)."""
    out: dict[str, list[str]] = {}
    for atom in env.episode.checklist:
        if not holds(env.world, atom):
            out.setdefault(atom.target, []).append(atom.subject)
    return {r: sorted(ids) for r, ids in out.items()}


def _check(env: CollabEnv, observations: dict[str, dict[str, Any]]) -> int:
    """Assert every observation's ``belongs`` fields; returns how many were non-empty."""
    expected, shown = _expected_belongs(env), 0
    for agent, obs in observations.items():
        assert env.observation_space(agent).contains(obs)
        for entry in obs["visible"]:
            belongs = list(entry["belongs"])
            assert belongs == expected.get(entry["objectId"], []), entry["objectId"]
            if belongs:
                shown += 1
                assert f"; belongs here: {', '.join(belongs)}" in obs["text"]
    return shown


def test_visible_receptacles_list_exactly_the_goal_objects_that_belong_there_and_are_away() -> None:
    for task, seed in [(REARRANGE[0], 0), (REARRANGE[2], 1)]:
        env = make_env(task, n_agents=2, seed=seed, split="train")
        env.reset()
        world = env.world
        for oid, home in env.episode.homes.items():  # the recorded scene's receptacles
            assert world.specs[world.scene.initial[world.index_of[oid]].parent].object_id == home
        team = make_team("heuristic")
        obs, _ = env.reset(seed=seed)
        team.reset(list(env.possible_agents), env.task_info())
        shown = _check(env, obs)
        while env.agents:
            obs, *_, infos = env.step(team.act(obs))
            shown += _check(env, obs)
        trace = infos["agent_0"]["trace"]
        assert shown > 0, task  # the field was really exercised...
        assert any(a["satisfied"] for a in trace["atoms"]), task  # ...as objects went home


def test_tasks_without_home_clauses_have_no_belongs_field() -> None:
    for task in ("transport_produce_fridge_v0", "search_produce_kitchen_v0"):
        env = make_env(task, n_agents=2, seed=0)
        env.reset()
        assert env.episode.homes == {}
        obs, *_ = env.step({"agent_0": "explore", "agent_1": "explore"})
        assert "belongs" not in env.observation_space("agent_0")["visible"].feature_space.spaces
        for o in obs.values():
            assert o["visible"] and all("belongs" not in e for e in o["visible"])
            assert "belongs here" not in o["text"]


class _OneCannotSee(HeuristicTeam):
    """The heuristic team with ``belongs`` removed from agent_1's observations: it can learn
    homes only from agent_0's messages."""

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        obs = dict(observations)
        blind = dict(obs["agent_1"])
        blind["visible"] = tuple(
            {k: v for k, v in e.items() if k != "belongs"} for e in blind["visible"]
        )
        obs["agent_1"] = blind
        return super().act(obs)


def test_an_agent_that_cannot_see_homes_learns_them_from_a_teammate() -> None:
    learned = {}
    for comm in (True, False):
        env = make_env("rearrange_kitchen_v0", n_agents=2, seed=2, split="train", comm=comm)
        env.reset()
        team = _OneCannotSee()
        trace = run_episode(env, team, seed=2)
        learner = team.agents["agent_1"].memory.homes
        learned[comm] = dict(learner.home)
        assert all(env.episode.homes[o] == home for o, home in learner.home.items())
        if comm:
            said = [m["text"] for m in trace["messages"] if m["sender"] == "agent_0"]
            assert any(t.startswith("home ") for t in said)
            puts = [
                s["target"]
                for s in trace["skills"]
                if s["agent"] == "agent_1" and s["skill"] == "put" and s["success"]
            ]
            assert set(puts) & set(learner.home.values()), "it carried something home"
    assert learned[True] and not learned[False]


def test_the_heuristic_team_solves_most_rearrangement_episodes_on_train_scenes() -> None:
    traces = [
        run_episode(
            make_env(task, n_agents=2, seed=seed, split="train"),
            make_team("heuristic"),
            seed=seed,
        )
        for task in REARRANGE
        for seed in range(3)
    ]
    solved = sum(t["final"]["success"] for t in traces)
    placed = [sum(t["final"]["satisfied"]) / len(t["final"]["satisfied"]) for t in traces]
    assert solved >= len(traces) // 2, solved
    assert sum(placed) / len(placed) >= 0.8, placed


def test_check_env_passes_on_a_rearrangement_task() -> None:
    """PettingZoo's API and seed tests and the strict space checks, with ``belongs`` in the
    observation space."""
    check_env(lambda: make_env("rearrange_bedroom_v0", n_agents=2, seed=0, split="train"))
