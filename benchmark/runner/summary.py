"""Aggregate episode rows into summary tables: mean and 95% interval per family and overall.

SR uses the Clopper-Pearson interval, the other metrics a Student-t interval. Rows are grouped
by baseline, communication setting and team size. Speedup, parallel efficiency and EI join each
row with the one-agent reference run of the same baseline, task, scene and seed. The
comm-ablation delta pairs comm-on and comm-off rows on the same task, seed and team size.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.metrics import METRIC_NAMES, add_reference_metrics, specialisation
from benchmark.stats import clopper_pearson, t_interval

SUMMARY_METRICS = (*METRIC_NAMES[:6], "speedup", "parallel_efficiency", "EI", *METRIC_NAMES[6:])


def with_reference(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-reference ok rows, with speedup / efficiency / EI from successful references."""
    ref = {
        (r["baseline"], r["task"], r["scene"], r["seed"], r["comm"]): r["L"]
        for r in rows
        if r["status"] == "ok" and r["n_agents"] == 1 and r.get("SR") == 1.0
    }
    out = []
    for r in rows:
        if r["status"] != "ok" or r["reference"]:
            continue
        key = (r["baseline"], r["task"], r["scene"], r["seed"], r["comm"])
        out.append(add_reference_metrics(dict(r), ref.get(key)))
    return out


# Metrics that are fractions: their intervals are clipped to [0, 1].
FRACTIONS = frozenset(
    {
        "TR",
        "C",
        "B",
        "workload_entropy",
        "workload_gini",
        "redundancy",
        "wasted_action_rate",
        "influence_rate",
    }
)
# Counts and durations: their intervals are clipped at 0.
NON_NEGATIVE = frozenset(
    {
        "L",
        "L_decisions",
        "speedup",
        "parallel_efficiency",
        "blocked_ticks",
        "collisions",
        "messages",
        "message_tokens",
    }
)


def _cell(values: list[Any], metric: str) -> dict[str, Any]:
    """Mean and 95% interval; intervals never leave the metric's range."""
    present = [float(v) for v in values if v is not None]
    if not present:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    if metric == "SR":
        lo, hi = clopper_pearson(int(sum(present)), len(present))
    else:
        lo, hi = t_interval(present)
    if metric in FRACTIONS:
        lo, hi = max(0.0, lo), min(1.0, hi)
    elif metric in NON_NEGATIVE:
        lo = max(0.0, lo)
    return {"mean": float(np.mean(present)), "lo": lo, "hi": hi, "n": len(present)}


def summarize(
    rows: list[dict[str, Any]],
    load_trace: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One summary record per (baseline, comm, n_agents, family or 'all')."""
    runs = with_reference(rows)
    errors: dict[tuple, int] = defaultdict(int)
    for r in rows:
        if r["status"] != "ok" and not r["reference"]:
            for fam in (r.get("family", "?"), "all"):
                errors[(r["baseline"], r["comm"], r["n_agents"], fam)] += 1
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        for fam in (r["family"], "all"):
            groups[(r["baseline"], r["comm"], r["n_agents"], fam)].append(r)
    for key in errors:
        groups.setdefault(key, [])
    out = []
    for (baseline, comm, n, fam), members in sorted(groups.items(), key=lambda kv: str(kv[0])):
        rec: dict[str, Any] = {
            "baseline": baseline,
            "comm": comm,
            "n_agents": n,
            "family": fam,
            "episodes": len(members),
            "errors": errors[(baseline, comm, n, fam)],
        }
        for metric in SUMMARY_METRICS:
            rec[metric] = _cell([m.get(metric) for m in members], metric)
        rec["specialisation"] = (
            specialisation(load_trace(m) for m in members) if load_trace and members else None
        )
        out.append(rec)
    return out


def comm_deltas(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """metric(comm on) - metric(comm off) over pairs on the same task, seed and team size."""
    runs = with_reference(rows)
    by = {(r["baseline"], r["task"], r["seed"], r["n_agents"], r["comm"]): r for r in runs}
    deltas: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (baseline, task, seed, n, comm), on in by.items():
        off = by.get((baseline, task, seed, n, False))
        if not comm or off is None:
            continue
        for fam in (on["family"], "all"):
            for metric in ("SR", "TR", "L", "B", "redundancy", "messages"):
                if on.get(metric) is not None and off.get(metric) is not None:
                    deltas[(baseline, n, fam)][metric].append(on[metric] - off[metric])
    return [
        {
            "baseline": b,
            "n_agents": n,
            "family": fam,
            "pairs": len(next(iter(d.values()), [])),
            **{m: _cell(v, "delta") for m, v in d.items()},
        }
        for (b, n, fam), d in sorted(deltas.items(), key=lambda kv: str(kv[0]))
    ]


def _fmt(cell: Any) -> str:
    if not isinstance(cell, dict):
        return "" if cell is None else f"{cell:.3f}" if isinstance(cell, float) else str(cell)
    if cell["mean"] is None:
        return "-"
    return f"{cell['mean']:.3f} [{cell['lo']:.3f}, {cell['hi']:.3f}]"


TABLE_COLUMNS = (
    "baseline",
    "comm",
    "n_agents",
    "family",
    "episodes",
    "errors",
    "SR",
    "TR",
    "C",
    "B",
    "L",
    "speedup",
    "redundancy",
    "messages",
    "specialisation",
)


def _markdown_table(columns: tuple[str, ...], records: list[dict[str, Any]]) -> list[str]:
    head = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return head + ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in records]


def write_summary(root: Path, table: list[dict[str, Any]], deltas: list[dict[str, Any]]) -> None:
    """``summary.md`` (readable) and ``summary.csv`` (mean, lo, hi columns per metric)."""
    lines = ["# Summary", "", "Mean [95% interval]; SR: Clopper-Pearson, others: t interval.", ""]
    lines += _markdown_table(TABLE_COLUMNS, table)
    if deltas:
        cols = ("baseline", "n_agents", "family", "pairs", "SR", "TR", "L", "messages")
        lines += ["", "## Communication ablation (comm on - comm off, paired)", ""]
        lines += _markdown_table(cols, deltas)
    (root / "summary.md").write_text("\n".join(lines) + "\n")
    with (root / "summary.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        head = ["baseline", "comm", "n_agents", "family", "episodes", "errors", "specialisation"]
        writer.writerow(head + [f"{m}_{p}" for m in SUMMARY_METRICS for p in ("mean", "lo", "hi")])
        for rec in table:
            cells = [rec[h] for h in head]
            for m in SUMMARY_METRICS:
                cells += [rec[m]["mean"], rec[m]["lo"], rec[m]["hi"]]
            writer.writerow(cells)
