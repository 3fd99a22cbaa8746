"""Challenges of the hidden-seed test track: the same task x scene cells for every team, seeds
from the hidden pool that depend on the secret, the team and the challenge, deterministic for
the same inputs, and every drawn episode (and its one-agent reference) builds in the real env."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir

from baselines.rl.core.config import EvalSettings
from benchmark.env import make_env
from benchmark.paths import CONFIGS_DIR
from benchmark.results.challenge import Challenge
from benchmark.runner.app import build_jobs
from benchmark.runner.config import register_configs
from benchmark.sim.facts import scene_splits
from benchmark.tasks.spec import load_task
from leaderboard.core.challenges import (
    MAX_DRAWS,
    SEED_POOL,
    Cell,
    draw_episodes,
    issue_challenge,
    suite_cells,
)

SECRET = bytes(range(32))
NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def _issue(team: str = "team-a", cid: str = "ch-1", secret: bytes = SECRET, scenes: int = 2):
    return issue_challenge(
        secret, team, "test", now=NOW, lifetime=timedelta(hours=72), scenes=scenes,
        challenge_id=cid,
    )  # fmt: skip


def _cells(challenge: Challenge) -> list[tuple[str, str, int]]:
    return [(e.task, e.scene, e.n_agents) for e in challenge.episodes]


def _seeds(challenge: Challenge) -> list[int]:
    return [e.seed for e in challenge.episodes]


def test_the_same_inputs_give_the_same_challenge() -> None:
    first = _issue()
    assert _issue() == first
    assert (first.id, first.team, first.suite, first.suite_version) == (
        "ch-1", "team-a", "test", "v1",
    )  # fmt: skip
    assert first.expires == "2030-01-04T12:00:00+00:00"
    assert Challenge.from_json(json.loads(json.dumps(first.to_json()))) == first


def test_every_team_and_challenge_gets_the_same_cells_and_other_seeds() -> None:
    base = _issue()
    others = [_issue(team="team-b"), _issue(cid="ch-2"), _issue(secret=bytes(32))]
    for other in others:
        assert _cells(other) == _cells(base)
        assert all(a != b for a, b in zip(_seeds(other), _seeds(base), strict=True))
    issued = issue_challenge(
        SECRET, "team-a", "test", now=NOW, lifetime=timedelta(hours=1), scenes=2
    )
    assert issued.id.startswith("ch-") and issued.id != base.id
    assert _seeds(issued) != _seeds(base)


def test_seeds_come_from_the_hidden_pool_above_every_published_seed() -> None:
    seeds = [s for cid in ("ch-1", "ch-2", "ch-3") for s in _seeds(_issue(cid=cid))]
    low, high = SEED_POOL
    assert all(low <= s < high for s in seeds)
    assert len(set(seeds)) == len(seeds)
    published = [
        seed
        for path in (CONFIGS_DIR / "suite").glob("*.yaml")
        for entry in yaml.safe_load(path.read_text())["entries"]
        for seed in entry["seeds"]
    ]
    assert published and max(published) < low
    # The trainers' held-out evaluation seeds are published too (and far from exhausted).
    assert EvalSettings().seed_start + 1_000_000 < low


def test_cells_are_each_entrys_first_scenes_of_its_split_that_set_up() -> None:
    suite = yaml.safe_load((CONFIGS_DIR / "suite" / "test.yaml").read_text())
    version, cells = suite_cells("test", 3)
    assert version == suite["version"]
    test_scenes = set(scene_splits()["test"])
    expected_tasks = [e["task"] for e in suite["entries"] for _ in e["n_agents"]]
    assert [c.task for c in cells[::3]] == expected_tasks
    for entry in suite["entries"]:
        chosen = [c.scene for c in cells if c.task == entry["task"]]
        eligible = load_task(entry["task"]).eligible_scenes(entry["split"])
        assert len(chosen) == 3 and set(chosen) <= test_scenes
        # in the task's order, skipping only scenes where the task cannot be set up
        assert chosen == sorted(chosen, key=eligible.index)
    # rearrange_living_room_v0 cannot be set up in FloorPlan228: the next scene is taken
    living = [c.scene for c in cells if c.task == "rearrange_living_room_v0"]
    assert living == ["FloorPlan226", "FloorPlan227", "FloorPlan229"]
    _, fewer = suite_cells("test", 1)
    assert list(fewer) == [c for c in cells if c.scene == _first_scene(cells, c.task)]


def _first_scene(cells: tuple[Cell, ...], task: str) -> str:
    return next(c.scene for c in cells if c.task == task)


def test_every_drawn_episode_and_its_reference_builds() -> None:
    challenge = _issue(scenes=3)
    assert len(challenge.episodes) == 18
    for ep in challenge.episodes:
        options = {"split": "test", "challenge": challenge.id}
        env = make_env(ep.task, scene=ep.scene, n_agents=ep.n_agents, seed=ep.seed, **options)
        env.reset()
        assert (env.episode.scene, env.episode.seed, env.n_agents) == (
            ep.scene, ep.seed, ep.n_agents,
        )  # fmt: skip
        reference = make_env(ep.task, scene=ep.scene, n_agents=1, seed=ep.seed,
                             strict_agents=False, **options)  # fmt: skip
        reference.reset()
        assert reference.episode.scene == ep.scene


def test_the_runner_accepts_an_issued_challenge(tmp_path: Path) -> None:
    challenge = _issue()
    path = tmp_path / "challenge.json"
    path.write_text(json.dumps(challenge.to_json()))
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        cfg = compose(
            "run", overrides=["suite=test", f"challenge={path}", f"output_dir={tmp_path / 'r'}"]
        )
    jobs = build_jobs(cfg)
    runs = sorted((j.task, j.scene, j.seed, j.n_agents) for j in jobs if not j.reference)
    assert runs == sorted((e.task, e.scene, e.seed, e.n_agents) for e in challenge.episodes)
    assert {j.env_options["challenge"] for j in jobs} == {"ch-1"}


def test_a_cell_that_never_sets_up_is_an_error_not_a_silent_gap() -> None:
    cell = Cell("rearrange_living_room_v0", "test", "FloorPlan228", 2)
    with pytest.raises(ValueError, match=f"no seed of {MAX_DRAWS} draws sets up cell"):
        draw_episodes(SECRET, "team-a", "ch-1", (cell,))


def test_only_hidden_seed_suites_issue_challenges() -> None:
    with pytest.raises(ValueError, match=r"suite 'smoke' publishes seeds"):
        _issue_suite("smoke")
    with pytest.raises(ValueError, match=r"unknown suite 'nope'; known suites are \[.*'test'"):
        _issue_suite("nope")
    with pytest.raises(ValueError, match="now: give a timezone-aware datetime"):
        issue_challenge(SECRET, "a", "test", now=datetime(2030, 1, 1),
                        lifetime=timedelta(hours=1), scenes=1)  # fmt: skip
    with pytest.raises(ValueError, match="lifetime"):
        issue_challenge(SECRET, "a", "test", now=NOW, lifetime=timedelta(0), scenes=1)


def _issue_suite(suite: str) -> Challenge:
    return issue_challenge(SECRET, "a", suite, now=NOW, lifetime=timedelta(hours=1), scenes=1)
