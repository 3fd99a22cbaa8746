"""Teams of up to eight agents: they fit the scene or the error says why, eight-agent kitchen
episodes run, interference is counted on real episodes, and a run over several team sizes
reports speedup, parallel efficiency and interference per size."""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from rich.console import Console

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.env.replay import replay
from benchmark.metrics.episode import BLOCKED_BY_AGENT, episode_metrics
from benchmark.paths import CONFIGS_DIR
from benchmark.rollout import run_episode
from benchmark.runner.app import build_jobs, run
from benchmark.runner.config import register_configs
from benchmark.sim import Controller
from benchmark.sim import controller as controller_module
from benchmark.sim.controller import start_poses
from benchmark.sim.failures import Failure
from benchmark.sim.initialize import MAX_AGENTS
from benchmark.sim.scene import GRID_SIZE, load_scene
from benchmark.sim.world import World

register_configs()
KITCHEN_TASK = "transport_produce_fridge_v0"
# In FloorPlan1 the cell (-3, -5) lies between (-4, -5) and (-2, -5); from those two cells the
# shortest walks to these drawers both start with a step into it.
EAST_DRAWER = "Drawer|+00.95|+00.83|-02.20"
WEST_DRAWER = "Drawer|-01.56|+00.84|+00.20"
MIDDLE, WEST_OF_IT, EAST_OF_IT = (-3, -5), (-4, -5), (-2, -5)


def _cells(world: World) -> list[tuple[int, int]]:
    return [(a.i, a.j) for a in world.agents]


def _place(env, cells_and_headings: list[tuple[tuple[int, int], int]]) -> None:
    """Put the agents on the given cells, facing the given headings (a scripted start)."""
    for k, ((i, j), heading) in enumerate(cells_and_headings):
        ev = env.controller.step(
            action="Teleport",
            agentId=k,
            position={"x": i * GRID_SIZE, "z": j * GRID_SIZE},
            rotation=heading,
        )
        assert ev.events[k].metadata["lastActionSuccess"], ev.events[k].metadata["errorMessage"]


def _finish(env, first: dict[str, str], on_tick=None) -> dict:
    """Play ``first``, then let every agent that decides choose ``done``; the trace."""
    _, _, _, _, infos = env.step(first, on_tick=on_tick)
    while env.agents:
        _, _, _, _, infos = env.step(dict.fromkeys(env.agents, "done"))
    return next(iter(infos.values()))["trace"]


# ----------------------------------------------------------------------------- room for agents
def test_eight_agents_start_on_distinct_reachable_cells_and_nine_are_refused() -> None:
    assert MAX_AGENTS == 8
    for seed in range(5):
        c = Controller(scene="FloorPlan1", agentCount=8, seed=seed)
        cells = set(_cells(c.world))
        assert len(cells) == 8 and cells <= c.scene.reachable_set
    with pytest.raises(ValueError, match=r"agentCount=9 must be an integer in 1\.\.8"):
        Controller(scene="FloorPlan1", agentCount=9)


def test_too_few_reachable_cells_for_the_agents_is_an_error_naming_scene_count_and_cells() -> None:
    # No iTHOR floor plan is that small (the smallest, FloorPlan25 and FloorPlan425, have 27 and
    # 25 reachable cells), so the check runs on a real scene's reachable cells, truncated.
    cells = load_scene("FloorPlan25").reachable[:5]
    with pytest.raises(ValueError, match="scene FloorPlan25 has 5 reachable cells, too few for "):
        start_poses("FloorPlan25", cells, 8, seed=0)
    placed = start_poses("FloorPlan25", cells, 5, seed=0)
    assert {(a.i, a.j) for a in placed} == set(cells)


def test_a_scene_cut_down_to_five_cells_refuses_six_agents_at_reset_and_stays_as_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = load_scene("FloorPlan25")
    tiny = dataclasses.replace(
        real, reachable=real.reachable[:5], reachable_set=frozenset(real.reachable[:5])
    )
    monkeypatch.setattr(controller_module, "load_scene", lambda name, cache=None: tiny)
    message = r"scene FloorPlan25 has 5 reachable cells, too few for agentCount=6"
    with pytest.raises(ValueError, match=message):
        Controller(scene="FloorPlan25", agentCount=6)
    c = Controller(scene="FloorPlan25", agentCount=5, seed=3)
    before = _cells(c.world)
    with pytest.raises(ValueError, match=message):
        c.reset(agentCount=6)
    with pytest.raises(ValueError, match=message):
        c.step(action="Initialize", agentCount=6)
    assert c.agent_count == 5 and _cells(c.world) == before
    assert c.initialization_parameters["agentCount"] == 5
    with pytest.raises(ValueError, match=message):
        make_env(KITCHEN_TASK, scene="FloorPlan25", n_agents=6, seed=0).reset()


# ----------------------------------------------------------------------------- eight agents
def test_an_eight_agent_kitchen_episode_is_solved_by_the_oracle_and_replays() -> None:
    # Seed 2 once had an explorer and a carrier trade one cell until the episode ran out.
    env = make_env(KITCHEN_TASK, scene="FloorPlan1", n_agents=8, seed=2, observability="full")
    env.reset()
    assert len(set(_cells(env.world))) == 8
    trace = run_episode(env, make_team("oracle"), seed=2)
    assert trace["config"]["n_agents"] == 8 and trace["final"]["success"]
    assert all(trace["final"]["decisions"][f"agent_{k}"] > 0 for k in range(8))
    assert replay(trace).ok
    m = episode_metrics(trace)
    assert 0 <= m["collisions"] <= m["blocked_ticks"]
    assert len(m["credited"]) == 8 and sum(m["credited"]) == len(trace["checklist"])


def test_an_eight_agent_heuristic_team_solves_a_kitchen_episode() -> None:
    env = make_env(KITCHEN_TASK, scene="FloorPlan1", n_agents=8, seed=1)
    trace = run_episode(env, make_team("heuristic"), seed=1)
    assert trace["final"]["success"] and trace["final"]["ticks"] < env.task.max_ticks
    assert len(trace["ticks"][0]) == 8


def test_a_navigating_agent_goes_before_an_explorer_stepping_into_the_same_cell() -> None:
    # With the explorer (agent 0) first, the courtesy rule pushed it back out of the cell the
    # carrier wanted, it walked in again, and the two traded the cell until the tick limit.
    env = make_env(
        "search_produce_kitchen_v0", scene="FloorPlan29", n_agents=3, seed=1, observability="full"
    )
    trace = run_episode(env, make_team("oracle"), seed=1)
    assert trace["final"]["success"] and trace["final"]["ticks"] < 60


def test_oracle_agents_stuck_against_each_other_in_a_narrow_passage_back_off_by_index() -> None:
    # In FloorPlan30's one-cell passage a carrier heading east, an agent heading west and an idle
    # one between them blocked each other until the tick limit; now the higher index walks off.
    env = make_env(
        "search_produce_kitchen_v0", scene="FloorPlan30", n_agents=6, seed=3, observability="full"
    )
    trace = run_episode(env, make_team("oracle"), seed=3)
    assert trace["final"]["success"]
    by_agent: dict[str, list[dict]] = {}
    for rec in trace["skills"]:
        by_agent.setdefault(rec["agent"], []).append(rec)
    backed_off = [
        agent
        for agent, recs in by_agent.items()
        for before, after in itertools.pairwise(recs)
        if before["skill"] == "navigate" and before["reason"] == "stuck"
        if after["skill"] == "explore"
    ]
    assert backed_off and "agent_0" not in backed_off


# ----------------------------------------------------------------------------- interference
def test_two_navigators_stepping_into_one_cell_are_a_collision_the_lower_index_wins() -> None:
    env = make_env(KITCHEN_TASK, scene="FloorPlan1", n_agents=2, seed=0, observability="full")
    env.reset()
    _place(env, [(WEST_OF_IT, 90), (EAST_OF_IT, 270)])
    after: list[list[tuple[int, int]]] = []
    trace = _finish(
        env,
        {"agent_0": f"navigate {EAST_DRAWER}", "agent_1": f"navigate {WEST_DRAWER}"},
        on_tick=lambda world: after.append(_cells(world)),
    )
    assert after[0] == [MIDDLE, EAST_OF_IT]
    assert trace["ticks"][0] == [
        ["Teleport", True, "navigate", False],
        ["Teleport", False, "navigate", True],
    ]
    m = episode_metrics(trace)
    failed_steps = sum(c[:2] == ["Teleport", False] for row in trace["ticks"] for c in row)
    assert m["collisions"] == failed_steps >= 1
    assert m["blocked_ticks"] >= m["collisions"] + 1  # the head-on wait after the collision


def test_two_primitive_moves_into_one_cell_are_one_collision_and_one_blocked_tick() -> None:
    env = make_env(KITCHEN_TASK, scene="FloorPlan1", n_agents=2, seed=0, action_level="primitive")
    env.reset()
    _place(env, [(WEST_OF_IT, 90), (EAST_OF_IT, 270)])
    after: list[list[tuple[int, int]]] = []
    trace = _finish(
        env,
        {"agent_0": "MoveAhead", "agent_1": "MoveAhead"},
        on_tick=lambda world: after.append(_cells(world)),
    )
    assert sorted(after[0]) == sorted([MIDDLE, EAST_OF_IT]) or sorted(after[0]) == sorted(
        [MIDDLE, WEST_OF_IT]
    )
    assert [r["reason"] for r in trace["skills"][:2]].count(BLOCKED_BY_AGENT) == 1
    m = episode_metrics(trace)
    assert m["collisions"] == 1 and m["blocked_ticks"] == 1


def test_the_metrics_spell_the_simulators_blocked_reason() -> None:
    assert Failure.BLOCKED == BLOCKED_BY_AGENT


# ----------------------------------------------------------------------------- scaling runs
def _cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return compose(
            "run", overrides=[f"output_dir={tmp_path}", "logger.console=false", *overrides]
        )


def test_the_scaling_suite_runs_one_to_eight_agents_and_heavy_lifting_from_two() -> None:
    jobs = build_jobs(_cfg(Path("/tmp/unused"), "suite=scaling"))
    sizes = {(j.task, j.n_agents) for j in jobs if not j.reference}
    assert ("transport_produce_fridge_v0", 8) in sizes and ("heavy_box_sofa_v0", 8) in sizes
    assert ("heavy_box_sofa_v0", 1) not in sizes
    assert {j.task for j in jobs if j.reference} == {"heavy_box_sofa_v0", "heavy_cookware_sink_v0"}


def test_a_run_over_team_sizes_reports_speedup_efficiency_and_interference(tmp_path: Path) -> None:
    entries = (
        "suite.entries=[{task: transport_produce_fridge_v0, split: test, n_agents: [1, 2, 4, 8], "
        "seeds: [0]}]"
    )
    with open(os.devnull, "w") as quiet:
        result = run(_cfg(tmp_path, entries, "workers=0"), Console(file=quiet))
    rows = {r["n_agents"]: r for r in result["rows"]}
    assert set(rows) == {1, 2, 4, 8} and all(r["SR"] == 1.0 for r in rows.values())
    overall = {r["n_agents"]: r for r in result["table"] if r["family"] == "all"}
    for n, rec in overall.items():
        speedup = rows[1]["L"] / rows[n]["L"]
        assert rec["speedup"]["mean"] == pytest.approx(speedup)
        assert rec["parallel_efficiency"]["mean"] == pytest.approx(speedup / n)
        assert rec["EI"]["mean"] == pytest.approx(1 - rows[n]["L"] / rows[1]["L"])
        assert rec["blocked_ticks"]["mean"] == rows[n]["blocked_ticks"] >= 0
    summary = (tmp_path / "summary.md").read_text()
    scaling = summary.split("## Scaling (per team size)")[1]
    header = next(line for line in scaling.splitlines() if line.startswith("| baseline"))
    for column in ("speedup", "parallel_efficiency", "EI", "B", "blocked_ticks", "collisions"):
        assert f" {column} |" in header
    assert [line.split(" | ")[2] for line in scaling.splitlines() if "| oracle" in line][:4] == [
        "1",
        "2",
        "4",
        "8",
    ]
