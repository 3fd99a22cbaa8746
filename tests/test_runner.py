"""The Hydra runner: configs, inline and Ray execution, results, resume, errors, summaries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from rich.console import Console

from benchmark.metric_specs import at_level
from benchmark.paths import CONFIGS_DIR, REPO_ROOT
from benchmark.runner.app import build_jobs, run
from benchmark.runner.config import register_configs
from benchmark.runner.execute import MAX_RAY_TMPDIR
from benchmark.runner.loggers import namespaced
from benchmark.runner.references import with_reference

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
        "logger": ["console", "wandb", "tensorboard"],
        "llm": ["none"],
    }.items():
        for option in options:
            cfg = _cfg(tmp_path, f"{group}={option}")
            chosen = cfg[group].get("name", cfg[group].get("backend"))
            if group == "logger":  # the console logger alone sends nothing elsewhere
                others = {"wandb", "tensorboard"} - {option}
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
    result = run(cfg, _quiet())
    keys = [r["key"] for r in result["rows"]]
    assert len(keys) == len(set(keys)) == 3


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

    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    logged = history(runs[0])
    assert sorted(logged) == [1, 2, 3]
    assert _same_rows(list(logged.values()), expected)
