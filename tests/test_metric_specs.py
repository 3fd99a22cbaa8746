"""The metric declarations: checked when made, computed as declared, and the one source of the
logger keys, the summary's columns and its intervals."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.metrics.episode import add_reference_metrics, episode_metrics, run_metrics
from benchmark.metrics.specs import (
    COUNT,
    FRACTION,
    METRICS,
    REAL,
    MetricSpec,
    Range,
    at_level,
    metric,
)
from benchmark.results.summary import interval_cell, summarize, write_summary
from benchmark.rollout import run_episode
from benchmark.runner.loggers import namespaced


def names(*levels: str) -> set[str]:
    return {m.name for m in at_level(*levels)}


@pytest.fixture(scope="module")
def traces() -> list[dict]:
    """A successful two-agent episode with messages, and a failed one-agent episode."""
    out = []
    for task, n, seed in (("transport_produce_fridge_v0", 2, 0), ("switch_off_bedroom_v0", 1, 1)):
        env = make_env(task, n_agents=n, seed=seed, split="test", strict_agents=False)
        out.append(run_episode(env, make_team("heuristic"), seed=seed))
    return out


def test_each_level_is_computed_by_its_function_under_the_declared_names(traces) -> None:
    for trace in traces:
        assert set(episode_metrics(trace)) - {"credited"} == names("episode")
    row = add_reference_metrics({"n_agents": 2, "L": 20}, 30)
    assert set(row) - {"n_agents", "L"} == names("reference")
    assert set(run_metrics(traces)) == names("run")


def test_real_episode_values_lie_in_their_declared_ranges(traces) -> None:
    for trace in traces:
        row = {**episode_metrics(trace), "n_agents": trace["config"]["n_agents"]}
        add_reference_metrics(row, 2 * row["L"])
        for spec in at_level("episode", "reference"):
            value = row[spec.name]
            if value is not None:
                assert spec.range.low <= value <= spec.range.high, (spec.name, value)
    assert 0.0 <= run_metrics(traces)["specialisation"] <= 1.0


def test_logger_keys_are_the_declared_namespaced_names() -> None:
    row = {m.name: 0.5 for m in METRICS}
    assert set(namespaced(row)) == {m.key for m in at_level("episode", "reference")}
    assert namespaced({"SR": 1.0, "speedup": None}) == {"task/SR": 1.0}


def test_the_summary_has_a_cell_per_declared_metric_and_clips_to_its_range(
    traces, tmp_path: Path
) -> None:
    rows = [
        {
            **episode_metrics(t),
            "key": f"k{k}",
            "baseline": "heuristic",
            "task": t["config"]["task"],
            "family": "f",
            "scene": t["config"]["scene"],
            "seed": t["config"]["seed"],
            "comm": True,
            "n_agents": t["config"]["n_agents"],
            "reference": False,
            "status": "ok",
        }
        for k, t in enumerate(traces)
    ]
    table = summarize(rows, lambda r: traces[int(r["key"][1:])])
    overall = next(r for r in table if r["family"] == "all" and r["n_agents"] == 2)
    assert names("episode", "reference", "run") <= set(overall)
    write_summary(tmp_path, table, [])
    header = next(csv.reader((tmp_path / "summary.csv").open()))
    for spec in at_level("episode", "reference"):
        assert {f"{spec.name}_mean", f"{spec.name}_lo", f"{spec.name}_hi"} <= set(header)
    assert names("run") <= set(header)
    headline = [m.name for m in METRICS if m.headline]
    assert all(f" {name} |" in (tmp_path / "summary.md").read_text() for name in headline)
    ei = interval_cell([0.9, 0.95, 0.2], metric("EI"))
    assert ei["hi"] == 1.0 and ei["lo"] < 0.2  # EI = 1 - L_n / L_1 never exceeds 1
    sr = interval_cell([1.0, 1.0, 1.0], metric("SR"))
    assert sr["mean"] == 1.0 and sr["hi"] == 1.0 and 0.2 < sr["lo"] < 1.0  # Clopper-Pearson


def test_declarations_are_checked_and_errors_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"namespace 'losses' is not one of \('task'"):
        MetricSpec("x", "losses", FRACTION, "episode", "x")
    with pytest.raises(ValueError, match=r"level 'tick' is not one of"):
        MetricSpec("x", "task", FRACTION, "tick", "x")
    with pytest.raises(ValueError, match=r"interval 'wilson' is not one of"):
        MetricSpec("x", "task", FRACTION, "episode", "x", interval="wilson")
    with pytest.raises(ValueError, match="Clopper-Pearson interval needs 0/1 values"):
        MetricSpec("x", "task", COUNT, "episode", "x", interval="clopper_pearson")
    with pytest.raises(ValueError, match="name must be an identifier"):
        MetricSpec("task/x", "task", REAL, "episode", "x")
    with pytest.raises(ValueError, match="definition must not be empty"):
        MetricSpec("x", "task", REAL, "episode", "")
    with pytest.raises(ValueError, match="low=1 must be below high=0"):
        Range("backwards", 1, 0)
    with pytest.raises(ValueError, match="unknown metric 'ST'; declared metrics are"):
        metric("ST")
    with pytest.raises(ValueError, match="unknown metric level"):
        at_level("step")
    assert REAL.clip(-math.inf, 3.0) == (-math.inf, 3.0)
