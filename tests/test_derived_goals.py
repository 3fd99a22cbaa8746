"""Goals on objects that exist only after an action, and goals reached through a container:
the oracle and the heuristic pursue them on the real scenes (task files written by a user)."""

from __future__ import annotations

from pathlib import Path

import yaml

from benchmark.agents import make_team
from benchmark.env import make_env, replay
from benchmark.rollout import run_episode

TOMATO_ON_PLATE = {
    "id": "slice_tomato_plate_v0",
    "family": "prepare",
    "instructions": {
        "explicit": "Put a slice of tomato on {targets}.",
        "types": "Slice a tomato and put a slice on a plate.",
        "implicit": "Serve some tomato.",
    },
    "scenes": {"room_types": ["kitchens"]},
    "agents": {"min": 1, "max": 4},
    "limits": {"ticks": 300, "decisions": 120},
    "goal": ["any: inside(TomatoSliced, Plate)"],
}
STATUES_ON_SOFA = {
    "id": "statue_sofa_v0",
    "family": "transport",
    "instructions": {
        "explicit": "Put {subjects} on {targets}.",
        "types": "Put every statue on the sofa.",
        "implicit": "The statues belong on the sofa.",
    },
    "scenes": {"room_types": ["living_rooms"]},
    "agents": {"min": 1, "max": 4},
    "limits": {"ticks": 300, "decisions": 120},
    "goal": ["all: inside(Statue, Sofa)"],
}


def _file(tmp_path: Path, data: dict) -> str:
    path = tmp_path / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _events(trace: dict) -> list[tuple[str, str]]:
    return [(s["skill"], s["target"] or "") for s in trace["skills"] if s["success"]]


def test_the_oracle_slices_a_tomato_and_puts_a_slice_on_a_plate(tmp_path: Path) -> None:
    path = _file(tmp_path, TOMATO_ON_PLATE)
    for seed, n in ((0, 1), (1, 2), (2, 2)):
        env = make_env(path, n_agents=n, seed=seed, observability="full")
        trace = run_episode(env, make_team("oracle"), seed=seed)
        assert trace["final"]["success"], (seed, n)
        done = _events(trace)
        sliced = [k for k, (skill, t) in enumerate(done) if skill == "slice" and "Tomato" in t]
        placed = [k for k, (skill, t) in enumerate(done) if skill == "put" and "Plate" in t]
        assert sliced and placed and sliced[0] < placed[-1], "slice first, then the plate"
        assert replay(trace).ok


def test_the_oracle_puts_statues_on_the_sofa_inside_a_box(tmp_path: Path) -> None:
    path = _file(tmp_path, STATUES_ON_SOFA)
    env = make_env(path, n_agents=2, seed=0, observability="full")
    trace = run_episode(env, make_team("oracle"), seed=0)
    assert trace["final"]["success"]
    done = _events(trace)
    assert any(skill == "put" and t.startswith("Box|") for skill, t in done)
    refused = [s for s in trace["skills"] if s["reason"] == "incompatible"]
    assert refused == [], "no statue is ever put on the sofa directly"


def test_the_heuristic_slices_with_a_knife_it_finds_then_serves_a_slice(tmp_path: Path) -> None:
    path = _file(tmp_path, TOMATO_ON_PLATE)
    traces = [
        run_episode(make_env(path, n_agents=2, seed=seed), make_team("heuristic"), seed=seed)
        for seed in range(3)
    ]
    solved = [t for t in traces if t["final"]["success"]]
    assert solved, "a decentralised team under partial observability serves a slice"
    for trace in solved:
        done = _events(trace)
        knife = next(k for k, (s, t) in enumerate(done) if s == "pickup" and "Knife" in t)
        cut = next(k for k, (s, t) in enumerate(done) if s == "slice" and "Tomato" in t)
        assert knife < cut
