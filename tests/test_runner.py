"""The Hydra runner: configs, inline and Ray execution, results, resume, errors, summaries."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from rich.console import Console

from benchmark.metrics.specs import at_level
from benchmark.paths import CONFIGS_DIR, REPO_ROOT
from benchmark.results.references import with_reference
from benchmark.runner.app import build_jobs, run
from benchmark.runner.config import register_configs
from benchmark.runner.execute import MAX_RAY_TMPDIR
from benchmark.runner.loggers import namespaced

register_configs()
TINY = [
    "suite.entries=[{task: transport_produce_fridge_v0, split: test, n_agents: [2], seeds: [0, 1]},"
    "{task: switch_off_bedroom_v0, split: test, n_agents: [2], seeds: [0]}]",
]


def _cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        cfg = compose(
            "run", overrides=[f"output_dir={tmp_path}", "logger.console=false", *overrides]
        )
    return cfg


def _quiet() -> Console:
    return Console(file=open("/dev/null", "w"))


def test_every_config_group_composes_and_the_default_is_small(tmp_path: Path) -> None:
    for group, options in {
        "suite": ["default", "smoke", "full", "search"],
        "baseline": ["oracle", "random", "heuristic"],
        "logger": ["console", "wandb", "tensorboard", "prometheus"],
        "llm": ["none"],
    }.items():
        for option in options:
            cfg = _cfg(tmp_path, f"{group}={option}")
            chosen = cfg[group].get("name", cfg[group].get("backend"))
            if group == "logger":  # the console logger alone sends nothing elsewhere
                others = {"wandb", "tensorboard", "prometheus"} - {option}
                assert option == "console" or cfg.logger[option] is True, option
                assert not any(cfg.logger[o] for o in others), option
            else:
                assert chosen == option, (group, option, chosen)
    default = _cfg(tmp_path)
    jobs = build_jobs(default)
    assert len({j.task for j in jobs}) == 6 and len(jobs) <= 30
    ablation = _cfg(tmp_path, "experiment=comm_ablation")
    assert list(ablation.comm) == [True, False] and ablation.baseline.name == "heuristic"


def test_unknown_config_keys_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigCompositionException, match="wrkers"):
        _cfg(tmp_path, "wrkers=3")
    with pytest.raises(ConfigCompositionException, match="colour"):
        _cfg(tmp_path, "suite.entries=[{task: transport_produce_fridge_v0, colour: red}]")
    with pytest.raises(ValueError, match="unknown config key"):
        run(_cfg(tmp_path, "+colour=red"), _quiet())


def test_a_run_writes_config_manifest_rows_traces_and_summary(tmp_path: Path) -> None:
    result = run(_cfg(tmp_path, *TINY, "workers=0"), _quiet())
    root = result["root"]
    rows = [json.loads(line) for line in (root / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 6  # 3 episodes + 3 one-agent references
    for row in rows:
        assert row["status"] == "ok"
        for key in (
            "task",
            "scene",
            "seed",
            "n_agents",
            "baseline",
            "SR",
            "TR",
            "C",
            "B",
            "L",
            "trace_path",
            "trace_hash",
            "config_hash",
            "code_version",
            "task_version",
        ):
            assert key in row, key
        trace = json.loads((root / row["trace_path"]).read_text())
        assert trace["trace_hash"] == row["trace_hash"]
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["suite_version"] == "v1" and manifest["packages"]["ray"]
    assert OmegaConf.load(root / "config.yaml").workers == 0
    summary = (root / "summary.md").read_text()
    assert "transport" in summary and "switch-off" in summary and "[" in summary
    overall = next(r for r in result["table"] if r["family"] == "all")
    assert overall["SR"]["mean"] == 1.0 and overall["SR"]["lo"] < 1.0  # Clopper-Pearson
    assert overall["speedup"]["n"] > 0


def test_ray_workers_give_the_same_rows_as_inline(tmp_path: Path) -> None:
    inline = run(_cfg(tmp_path / "a", *TINY, "workers=0"), _quiet())
    on_ray = run(_cfg(tmp_path / "b", *TINY, "workers=2", "reference=false"), _quiet())

    def hashes(result, with_refs: bool) -> dict[str, str]:
        return {
            r["key"]: r["trace_hash"] for r in result["rows"] if with_refs or not r["reference"]
        }

    assert hashes(on_ray, True) == hashes(inline, False)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    if len(str((tmp_path / "b" / "ray").resolve())) <= MAX_RAY_TMPDIR:
        assert (tmp_path / "b" / "ray").is_dir(), "Ray's temporary files stay in the run directory"
    else:  # too long for Ray's socket paths: a short directory, recorded and removed afterwards
        assert not Path(manifest["ray_tmpdir"]).exists()
    assert {r["config_hash"] for r in inline["rows"]} != set() and all(
        r["code_version"] for r in on_ray["rows"]
    )


def test_rerunning_into_the_same_directory_resumes(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, *TINY, "workers=0", "reference=false")
    run(cfg, _quiet())
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    (tmp_path / "episodes.jsonl").write_text("\n".join(lines[:1]) + '\n{"torn')  # crash mid-write
    manifest_path = tmp_path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    current = manifest["code_version"]
    manifest_path.write_text(json.dumps({**manifest, "code_version": "0.0.0+earlier"}))
    result = run(cfg, _quiet())
    keys = [r["key"] for r in result["rows"]]
    assert len(keys) == len(set(keys)) == 3
    # Playing episodes stamps the manifest with the code that played them ...
    assert json.loads(manifest_path.read_text())["code_version"] == current
    # ... and running the finished run again leaves its directory as it was.
    manifest_path.write_text(json.dumps({**manifest, "code_version": "0.0.0+earlier"}))
    before = (tmp_path / "episodes.jsonl").read_text()
    run(cfg, _quiet())
    assert json.loads(manifest_path.read_text())["code_version"] == "0.0.0+earlier"
    assert (tmp_path / "episodes.jsonl").read_text() == before


def test_an_episode_that_raises_is_retried_then_recorded_as_an_error(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    try:
        result = run(
            _cfg(
                tmp_path,
                *TINY,
                "workers=0",
                "reference=false",
                "retries=2",
                "baseline.name=helpers.teams:CrashingTeamForTests",
                "baseline.env={}",
            ),
            _quiet(),
        )
    finally:
        sys.path.remove(str(REPO_ROOT / "tests"))
    errors = [r for r in result["rows"] if r["status"] == "error"]
    assert len(errors) == 2 and all(
        r["attempts"] == 3 and "deliberate" in r["error"] for r in errors
    )
    assert len(result["rows"]) == 3
    overall = next(r for r in result["table"] if r["family"] == "all")
    assert overall["errors"] == 2


def test_replay_writes_a_gif_and_an_escaped_viewer(tmp_path: Path) -> None:
    result = run(
        _cfg(
            tmp_path,
            "suite.entries=[{task: search_phone_bedroom_v0, split: test, n_agents: [2], "
            "seeds: [0]}]",
            "baseline=heuristic",
            "workers=0",
            "reference=false",
            "replay=true",
        ),
        _quiet(),
    )
    row = result["rows"][0]
    media = tmp_path / "episodes" / row["key"].replace("/", "__")
    assert (media / "episode.gif").stat().st_size > 1000
    page = (media / "episode.html").read_text()
    assert "Ticks" in page and "Messages" in page and "<script" not in page.lower()


def test_the_module_runs_from_the_command_line_with_a_multirun(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "benchmark.run",
        "-m",
        "baseline=oracle,random",
        "n_agents=1,2",
        "suite=smoke",
        "seeds=0",
        "workers=0",
        "reference=false",
        "logger.console=false",
        "suite.entries=[{task: switch_off_bedroom_v0, split: test, n_agents: [2], seeds: [0]}]",
        f"hydra.sweep.dir={tmp_path}",
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = sorted(p.parent for p in tmp_path.glob("*/episodes.jsonl"))
    assert len(runs) == 4
    baselines = {
        json.loads(p.joinpath("episodes.jsonl").read_text().splitlines()[0])["baseline"]
        for p in runs
    }
    assert baselines == {"oracle", "random"}


def test_speedup_can_come_from_a_previous_single_agent_run(tmp_path: Path) -> None:
    single = run(_cfg(tmp_path / "one", *TINY, "workers=0", "n_agents=1"), _quiet())
    assert all(r["n_agents"] == 1 for r in single["rows"])
    team = run(
        _cfg(tmp_path / "two", *TINY, "workers=0", f"reference_from={tmp_path / 'one'}"), _quiet()
    )
    assert all(not r["reference"] for r in team["rows"]), "no reference episodes were run again"
    overall = next(r for r in team["table"] if r["family"] == "all")
    assert overall["speedup"]["n"] == 3


def test_the_comm_ablation_pairs_comm_on_and_off(tmp_path: Path) -> None:
    result = run(
        _cfg(
            tmp_path,
            "experiment=comm_ablation",
            "workers=0",
            "reference=false",
            "suite.entries=[{task: search_phone_bedroom_v0, split: test, n_agents: [2],"
            " seeds: [0, 1]}]",
        ),
        _quiet(),
    )
    assert {r["comm"] for r in result["rows"]} == {True, False}
    delta = next(d for d in result["deltas"] if d["family"] == "all")
    on = [r["L"] for r in result["rows"] if r["comm"]]
    off = [r["L"] for r in result["rows"] if not r["comm"]]
    assert delta["pairs"] == 2
    assert delta["L"]["mean"] == pytest.approx((sum(on) - sum(off)) / 2)
    assert "Communication ablation" in (tmp_path / "summary.md").read_text()


def _same_rows(logged: list[dict[str, float]], expected: list[dict[str, float]]) -> bool:
    """Whether the logged rows are the expected ones, in any order, each exactly once."""
    left = list(logged)
    for row in expected:
        same = [k for k, got in enumerate(left) if got.keys() == row.keys()]
        match = next((k for k in same if left[k] == pytest.approx(row)), None)
        if match is None:
            return False
        left.pop(match)
    return not left


def test_every_declared_metric_reaches_tensorboard_and_offline_wandb_once(tmp_path: Path) -> None:
    from helpers.wandb_history import history
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = run(
        _cfg(
            tmp_path,
            "suite.entries=[{task: transport_produce_fridge_v0, split: test, n_agents: [2], "
            "seeds: [0]}, {task: switch_off_bedroom_v0, split: test, n_agents: [2], "
            "seeds: [0, 1]}]",
            "baseline=heuristic",
            "workers=0",
            "logger.wandb=true",
            "logger.wandb_mode=offline",
            "logger.tensorboard=true",
        ),
        _quiet(),
    )
    refs = {r["key"]: r["SR"] for r in result["rows"] if r["reference"]}
    assert sorted(refs.values()) == [0.0, 1.0, 1.0]  # one reference never comes
    expected = [namespaced(r) for r in with_reference(result["rows"])]
    assert len(expected) == 3 and sum("collab/speedup" in r for r in expected) == 2
    declared = {m.key for m in at_level("episode", "reference")}
    assert {k for r in expected for k in r} == declared, "the episodes define every metric"

    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    by_step: dict[int, dict[str, float]] = {}
    for tag in events.Tags()["scalars"]:
        for event in events.Scalars(tag):
            by_step.setdefault(event.step, {})[tag] = event.value
    assert sorted(by_step) == [1, 2, 3]
    assert _same_rows(list(by_step.values()), expected)

    # run.finish() only tells W&B's service that the run is over; the service writes the last
    # of the transaction log when its stream closes, which teardown waits for.
    import wandb

    wandb.teardown()
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    logged = history(runs[0])
    assert sorted(logged) == [1, 2, 3]
    assert _same_rows(list(logged.values()), expected)


def _dying_team(tmp_path: Path, task: str, **kwargs: object) -> list[str]:
    """Overrides that play the oracle as ``DyingTeamForTests`` (tests/helpers/teams.py), whose
    worker dies in the middle of the episodes of ``task``."""
    options = {"task": task, "marker_dir": str(tmp_path / "deaths"), "driver_pid": os.getpid()}
    options.update(kwargs)
    inner = ", ".join(f"{k}: {v}" for k, v in options.items())
    return [
        "baseline=oracle",
        "baseline.name=helpers.teams:DyingTeamForTests",
        f"+baseline.kwargs={{{inner}}}",
    ]


@pytest.fixture
def workers_see_test_teams(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray workers inherit this environment: let them import ``helpers.teams``."""
    paths = [str(REPO_ROOT / "tests"), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


def test_a_worker_killed_mid_episode_is_played_again(
    tmp_path: Path, workers_see_test_teams: None
) -> None:
    dying = _dying_team(tmp_path, "transport_produce_fridge_v0", times=1)
    result = run(
        _cfg(tmp_path / "run", *TINY, "workers=2", "reference=false", "retries=1", *dying),
        _quiet(),
    )
    assert len(list((tmp_path / "deaths").glob("*.death*"))) == 2, "both workers really died"
    rows = {r["task"]: r for r in result["rows"] if r["task"] != "transport_produce_fridge_v0"}
    again = [r for r in result["rows"] if r["task"] == "transport_produce_fridge_v0"]
    assert len(result["rows"]) == 3 and all(r["status"] == "ok" for r in result["rows"])
    assert [r["attempts"] for r in again] == [2, 2] and rows["switch_off_bedroom_v0"][
        "attempts"
    ] == 1
    # The episode played again is the oracle's episode, as if no worker had died.
    oracle = run(_cfg(tmp_path / "oracle", *TINY, "workers=0", "reference=false"), _quiet())
    assert {r["key"].split("/", 1)[1]: r["trace_hash"] for r in result["rows"]} == {
        r["key"].split("/", 1)[1]: r["trace_hash"] for r in oracle["rows"]
    }


def test_resuming_with_retry_errors_plays_the_error_rows_again(
    tmp_path: Path, workers_see_test_teams: None
) -> None:
    """A worker that dies once, with no retries left: an error row. Resumed as is, the run
    keeps it; resumed with ``retry_errors=true`` it sets the row aside and plays the episode
    again, to the oracle's very trace."""
    dying = _dying_team(tmp_path, "switch_off_bedroom_v0", times=1)
    overrides = [*TINY, "workers=2", "reference=false", "retries=0", *dying]
    first = run(_cfg(tmp_path / "run", *overrides), _quiet())
    (error,) = [r for r in first["rows"] if r["status"] == "error"]
    assert "worker died" in error["error"]
    with _no_ray_cluster():  # nothing to play: no cluster is started for nothing
        again = run(_cfg(tmp_path / "run", *overrides), _quiet())
    assert [r for r in again["rows"] if r["status"] == "error"] == [error]
    retried = run(_cfg(tmp_path / "run", *overrides, "retry_errors=true"), _quiet())
    assert sorted(r["status"] for r in retried["rows"]) == ["ok"] * 3
    set_aside = (tmp_path / "run" / "episodes.errors.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in set_aside] == [error]
    oracle = run(_cfg(tmp_path / "oracle", *TINY, "workers=0", "reference=false"), _quiet())
    assert {r["key"].split("/", 1)[1]: r["trace_hash"] for r in retried["rows"]} == {
        r["key"].split("/", 1)[1]: r["trace_hash"] for r in oracle["rows"]
    }
    # Nothing left to set aside: a further run changes nothing.
    with _no_ray_cluster():
        run(_cfg(tmp_path / "run", *overrides, "retry_errors=true"), _quiet())
    assert (tmp_path / "run" / "episodes.errors.jsonl").read_text().splitlines() == set_aside


@contextlib.contextmanager
def _no_ray_cluster() -> Iterator[None]:
    import ray

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a Ray cluster was started with no episode to play")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray, "init", refuse)
        yield


def test_a_batch_whose_worker_dies_is_split_and_played_again(
    tmp_path: Path, workers_see_test_teams: None
) -> None:
    dying = _dying_team(tmp_path, "switch_off_bedroom_v0", times=1)
    overrides = [*TINY, "workers=2", "reference=false", "retries=1", "batch_episodes=3"]
    result = run(_cfg(tmp_path / "run", *overrides, *dying), _quiet())
    assert len(list((tmp_path / "deaths").glob("*.death*"))) == 1
    # The three episodes played in the worker that died; each was played again on its own.
    assert sorted((r["status"], r["attempts"]) for r in result["rows"]) == [("ok", 2)] * 3
    oracle = run(_cfg(tmp_path / "oracle", *TINY, "workers=0", "reference=false"), _quiet())
    assert {r["key"].split("/", 1)[1]: r["trace_hash"] for r in result["rows"]} == {
        r["key"].split("/", 1)[1]: r["trace_hash"] for r in oracle["rows"]
    }


def test_a_worker_that_dies_every_time_gives_an_error_row_and_the_run_goes_on(
    tmp_path: Path, workers_see_test_teams: None
) -> None:
    cmd = [
        sys.executable,
        "-m",
        "benchmark.run",
        *TINY,
        *_dying_team(tmp_path, "switch_off_bedroom_v0", times=99),
        "workers=2",
        "reference=false",
        "retries=2",
        f"output_dir={tmp_path / 'run'}",
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=300, check=False
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert len(list((tmp_path / "deaths").glob("*.death*"))) == 3, "three real deaths"
    assert proc.stdout.count("playing it again") == 2 and "recording an error row" in proc.stdout
    rows = [json.loads(line) for line in (tmp_path / "run" / "episodes.jsonl").open()]
    (error,) = [r for r in rows if r["status"] == "error"]
    assert error["task"] == "switch_off_bedroom_v0" and error["attempts"] == 3
    assert "worker died" in error["error"] and "SIGKILL" in error["error"]
    assert sorted(r["seed"] for r in rows if r["status"] == "ok") == [0, 1]
    assert all((tmp_path / "run" / r["trace_path"]).is_file() for r in rows if r["status"] == "ok")
    summary = (tmp_path / "run" / "summary.md").read_text()
    assert "switch-off" in summary and "transport" in summary


def test_a_worker_that_ray_kills_for_memory_gives_an_error_row_naming_it(
    tmp_path: Path, workers_see_test_teams: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A threshold of 1% of the node's memory: Ray's monitor kills every running task, wherever
    # it is in the episode (the team waits to be killed, so that the episode never finishes).
    monkeypatch.setenv("RAY_memory_usage_threshold", "0.01")
    monkeypatch.setenv("RAY_memory_monitor_refresh_ms", "100")
    result = run(
        _cfg(
            tmp_path / "run",
            "suite.entries=[{task: switch_off_bedroom_v0, split: test, n_agents: [2], seeds: [0]}]",
            *_dying_team(tmp_path, "switch_off_bedroom_v0", times=99, how="wait"),
            "workers=2",
            "reference=false",
            "retries=1",
        ),
        _quiet(),
    )
    (row,) = result["rows"]
    assert row["status"] == "error" and row["attempts"] == 2
    assert "out of memory" in row["error"] and "threshold" in row["error"], row["error"]
    overall = next(r for r in result["table"] if r["family"] == "all")
    assert overall["errors"] == 1 and (tmp_path / "run" / "summary.md").is_file()
