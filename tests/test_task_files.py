"""Task files outside tasks/: used by path in make_env and the runner, recorded, replayed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from rich.console import Console

from benchmark.agents import make_team
from benchmark.env import make_env, replay
from benchmark.paths import CONFIGS_DIR
from benchmark.rollout import run_episode
from benchmark.runner.app import build_jobs, run
from benchmark.runner.config import register_configs
from benchmark.tasks.spec import TaskSpecError, task_registry

register_configs()
TOMATOES = {
    "id": "transport_tomato_fridge_v0",
    "family": "transport",
    "instructions": {
        "explicit": "Put {subjects} in {targets}.",
        "types": "Put the tomatoes in the fridge.",
        "implicit": "Keep the tomatoes fresh.",
    },
    "scenes": {"room_types": ["kitchens"]},
    "agents": {"min": 1, "max": 3},
    "limits": {"ticks": 200, "decisions": 80},
    "goal": ["all: inside(Tomato, Fridge)"],
}


def _write(folder: Path, data: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _oracle_trace(env) -> dict:
    return run_episode(env, make_team("oracle"), seed=env.seed)


def test_make_env_takes_a_task_file_path_and_the_trace_identifies_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "mine", TOMATOES)
    env = make_env(str(path), n_agents=2, seed=1, observability="full")
    env.reset()
    assert (
        env.task.id == "transport_tomato_fridge_v0"
        and "transport_tomato_fridge_v0" not in task_registry()
    )
    trace = _oracle_trace(env)
    assert trace["final"]["success"]
    assert trace["config"]["task_file"] == {
        "path": str(path.resolve()),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    result = replay(json.loads(json.dumps(trace)))
    assert result.ok, result
    again = make_env(path, n_agents=2, seed=1)
    again.reset()
    assert again.episode.checklist == env.episode.checklist


def test_a_registered_task_is_recorded_by_id_alone() -> None:
    env = make_env("transport_apple_fridge_v0", n_agents=2, seed=0)
    env.reset()
    assert "task_file" not in env.recorder.trace["config"]
    registered = task_registry()["transport_apple_fridge_v0"]
    assert make_env(registered.path, n_agents=2, seed=0).task is registered


def test_replay_refuses_a_task_file_that_changed_or_vanished(tmp_path: Path) -> None:
    path = _write(tmp_path, TOMATOES)
    env = make_env(path, n_agents=2, seed=0, observability="full")
    env.reset()
    trace = _oracle_trace(env)
    path.write_text(path.read_text().replace("Keep the tomatoes fresh", "Keep tomatoes fresh"))
    with pytest.raises(TaskSpecError, match="changed since it was recorded") as info:
        replay(trace)
    assert trace["config"]["task_file"]["sha256"] in str(info.value)
    path.unlink()
    with pytest.raises(TaskSpecError, match="cannot be read"):
        replay(trace)


def test_a_task_file_may_not_reuse_a_registered_id(tmp_path: Path) -> None:
    copy = _write(tmp_path, {**TOMATOES, "id": "transport_apple_fridge_v0"})
    with pytest.raises(TaskSpecError, match="is a registered task"):
        make_env(copy, n_agents=2, seed=0)


def _cfg(out: Path, task: str):
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return compose(
            "run",
            overrides=[
                f"output_dir={out}",
                "logger.console=false",
                "workers=0",
                "reference=false",
                f"suite.entries=[{{task: '{task}', split: test, n_agents: [2], seeds: [0, 1]}}]",
            ],
        )


def test_the_runner_runs_a_suite_entry_given_as_a_task_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path / "mine", TOMATOES)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    quiet = Console(quiet=True)
    result = run(_cfg(tmp_path / "run", str(path)), quiet)
    rows = result["rows"]
    assert len(rows) == 2
    for row in rows:
        assert row["status"] == "ok" and row["SR"] == 1.0
        assert (row["task"], row["task_file"], row["task_sha256"]) == (
            "transport_tomato_fridge_v0",
            str(path.resolve()),
            digest,
        )
        trace = json.loads((result["root"] / row["trace_path"]).read_text())
        assert trace["trace_hash"] == row["trace_hash"] and replay(trace).ok
    monkeypatch.chdir(tmp_path)  # relative paths are read from the working directory
    assert build_jobs(_cfg(tmp_path / "run", "mine/transport_tomato_fridge_v0.yaml"))[
        0
    ].task_file == str(path.resolve())
    path.write_text(path.read_text().replace("tomatoes fresh", "tomatoes cold"))
    with pytest.raises(ValueError, match="has changed"):
        run(_cfg(tmp_path / "run", str(path)), quiet)
