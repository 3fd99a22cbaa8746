"""The MAP-THOR suite: every task builds on each of its floor plans with MAP-THOR's
pre-initialisation applied, the oracle solves its episodes, and a run of the suite is
summarised per MAP-THOR level as well as per family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from benchmark import replay
from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.paths import CONFIGS_DIR, TASKS_DIR
from benchmark.rollout import run_episode
from benchmark.runner.app import build_jobs, run
from benchmark.runner.config import register_configs
from benchmark.tasks.episode import make_episode
from benchmark.tasks.spec import task_registry

register_configs()
MAPTHOR = {t.id: t for t in task_registry().values() if t.source and t.source.suite == "mapthor"}


def test_the_mapthor_tasks_are_tagged_and_listed_by_the_suite() -> None:
    folder = {p.stem for p in (TASKS_DIR / "mapthor").glob("*.yaml")}
    assert set(MAPTHOR) == folder and len(folder) == 25
    assert {t.source.level for t in MAPTHOR.values()} == {1, 2, 3, 4}
    assert all(t.id == f"mapthor_{t.source.name.split('_', 1)[1]}_v0" for t in MAPTHOR.values())
    suite = yaml.safe_load((CONFIGS_DIR / "suite" / "mapthor.yaml").read_text())
    entries = {e["task"]: e for e in suite["entries"]}
    assert set(entries) == set(MAPTHOR)
    for task_id, entry in entries.items():
        assert entry["scenes"] == MAPTHOR[task_id].candidate_scenes(), task_id


def test_every_mapthor_task_builds_on_each_floor_plan_with_its_placements() -> None:
    built = 0
    for task in MAPTHOR.values():
        assert not task.setup.randomize
        for scene in task.candidate_scenes():
            ep = make_episode(task, scene, 2, seed=0)
            assert ep.checklist, (task.id, scene)
            world = ep.world
            final: dict[str, tuple[float, float]] = {}
            for placement in task.setup.place.get(scene, ()):  # the last placement of each wins
                final[placement.object] = (placement.position[0], placement.position[2])
            for object_id, (x, z) in final.items():
                k = world.index_of[object_id]
                px, _, pz = world.position(k)
                assert (px, pz) == (x, z), (task.id, scene, object_id)
            built += 1
    assert built == 132


def _oracle(task: str, scene: str, n: int) -> tuple[dict, object]:
    env = make_env(task, scene=scene, n_agents=n, seed=0, observability="full")
    return run_episode(env, make_team("oracle"), seed=0), env


@pytest.mark.parametrize(
    ("task", "scene"),
    [
        # Two agents carry dishes to one fridge that must end closed.
        ("mapthor_put_plate_mug_bowl_fridge_v0", "FloorPlan1"),
        # The statue reaches the sofa inside the box; the pre-initialisation moved three objects.
        ("mapthor_clear_table_to_sofa_v0", "FloorPlan204"),
        # Washing under a running faucet after the set-up dirtied four objects.
        ("mapthor_wash_bowl_mug_pot_pan_v0", "FloorPlan3"),
    ],
)
def test_the_oracle_solves_mapthor_episodes_and_they_replay(task: str, scene: str) -> None:
    trace, env = _oracle(task, scene, 2)
    pairs = zip(env.episode.checklist, trace["final"]["satisfied"], strict=True)
    assert trace["final"]["success"], [a.key for a, ok in pairs if not ok]
    assert trace["final"]["ticks"] <= env.task.max_ticks
    result = replay(json.loads(json.dumps(trace)))
    assert result.ok and result.satisfied == trace["final"]["satisfied"]


def _cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return compose(
            "run", overrides=[f"output_dir={tmp_path}", "logger.console=false", *overrides]
        )


def test_a_run_of_mapthor_tasks_is_summarised_per_level(tmp_path: Path) -> None:
    entries = (
        "suite.entries=[{task: mapthor_turn_off_faucet_light_v0, split: mapthor, n_agents: [2],"
        " seeds: [0], scenes: [FloorPlan1, FloorPlan2]},"
        "{task: mapthor_make_livingroom_dark_v0, split: mapthor, n_agents: [2], seeds: [0],"
        " scenes: [FloorPlan201]}]"
    )
    cfg = _cfg(tmp_path, entries, "workers=0", "suite.name=mapthor_tiny")
    jobs = build_jobs(cfg)
    assert sorted((j.task, j.scene, j.n_agents) for j in jobs) == [
        ("mapthor_make_livingroom_dark_v0", "FloorPlan201", 1),
        ("mapthor_make_livingroom_dark_v0", "FloorPlan201", 2),
        ("mapthor_turn_off_faucet_light_v0", "FloorPlan1", 1),
        ("mapthor_turn_off_faucet_light_v0", "FloorPlan1", 2),
        ("mapthor_turn_off_faucet_light_v0", "FloorPlan2", 1),
        ("mapthor_turn_off_faucet_light_v0", "FloorPlan2", 2),
    ]
    result = run(cfg)
    assert {r["scene"] for r in result["rows"]} == {"FloorPlan1", "FloorPlan2", "FloorPlan201"}
    records = {(r["family"], r["level"]): r for r in result["table"]}
    assert set(records) == {("all", "all"), ("switch-off", "all"), ("all", "1"), ("all", "4")}
    assert records[("all", "1")]["episodes"] == 2 and records[("all", "4")]["episodes"] == 1
    assert records[("all", "all")]["episodes"] == 3
    assert records[("all", "1")]["SR"]["mean"] == 1.0
    assert result["table"][0]["level"] == "all"  # the overall and per-family records come first
    head = (tmp_path / "summary.csv").read_text().splitlines()[0].split(",")
    assert head[:5] == ["baseline", "comm", "n_agents", "family", "level"]
    assert "| family | level |" in (tmp_path / "summary.md").read_text()


def test_runs_without_levels_are_summarised_as_before(tmp_path: Path) -> None:
    entries = (
        "suite.entries=[{task: switch_off_bedroom_v0, split: test, n_agents: [2], seeds: [0]}]"
    )
    result = run(_cfg(tmp_path, entries, "workers=0", "reference=false"))
    assert all("level" not in r for r in result["table"])
    assert [r["family"] for r in result["table"]] == ["all", "switch-off"]
    assert "level" not in (tmp_path / "summary.csv").read_text().splitlines()[0].split(",")


def test_a_pinned_scene_outside_the_tasks_scenes_is_refused(tmp_path: Path) -> None:
    entries = (
        "suite.entries=[{task: mapthor_turn_off_faucet_light_v0, split: mapthor, n_agents: [2],"
        " seeds: [0], scenes: [FloorPlan201]}]"
    )
    with pytest.raises(ValueError, match="scene 'FloorPlan201' is not among the task's scenes"):
        build_jobs(_cfg(tmp_path, entries))
