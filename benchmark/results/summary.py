"""Aggregate episode rows into summary tables: mean and 95% interval per family and overall.

Rows of tasks that carry an ambiguity level from their source suite (MAP-THOR's 1-4) are also
grouped per level: every record then has a ``level`` ("all" in the per-family and overall
records, the level in the per-level ones, whose family is "all"). Suites without levels get the
same records as before, with no ``level``.

Each metric's interval method (Clopper-Pearson for SR, Student-t for the others), the range its
interval is clipped to, and whether summary.md shows it come from its declaration in
:mod:`benchmark.metrics.specs`. Rows are grouped by baseline, communication setting and team
size. Speedup, parallel efficiency and EI join each row with its one-agent reference
(:mod:`benchmark.results.references`). A run with several team sizes (``n_agents=[1,2,4,8]``)
also gets a scaling table in summary.md: SR, L, speedup, parallel efficiency, EI, balance and
the interference counts per team size. The comm-ablation delta pairs comm-on and comm-off rows
on the same task, seed and team size.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.metrics.episode import run_metrics
from benchmark.metrics.specs import METRICS, MetricSpec, at_level, metric
from benchmark.metrics.stats import clopper_pearson, t_interval
from benchmark.results.markdown import markdown_table
from benchmark.results.references import with_reference

# Per-episode metrics, the reference ones included, in declaration order: one cell each.
SUMMARY_METRICS = tuple(m.name for m in at_level("episode", "reference"))
# Metrics over a run's traces: one value per summary record, no interval.
RUN_METRICS = tuple(m.name for m in at_level("run"))
# Metrics compared between paired comm-on and comm-off runs (names checked when imported).
DELTA_METRICS = tuple(
    metric(name).name for name in ("SR", "TR", "L", "B", "redundancy", "messages")
)


def interval_cell(values: list[Any], spec: MetricSpec | None) -> dict[str, Any]:
    """Mean and 95% interval of one metric's values (``spec`` None: a difference of two runs,
    unbounded); the interval never leaves the metric's range."""
    present = [float(v) for v in values if v is not None]
    if not present:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    if spec is not None and spec.interval == "clopper_pearson":
        lo, hi = clopper_pearson(int(sum(present)), len(present))
    else:
        lo, hi = t_interval(present)
    if spec is not None:
        lo, hi = spec.range.clip(lo, hi)
    return {"mean": float(np.mean(present)), "lo": lo, "hi": hi, "n": len(present)}


def summarize(
    rows: list[dict[str, Any]],
    load_trace: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    references: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """One summary record per (baseline, comm, n_agents, family or 'all'), and per level when
    rows carry one (see the module docstring). ``references`` are one-agent rows of a previous
    run (``reference_from``)."""
    runs = with_reference(rows, references)
    levels = any(r.get("level") is not None for r in rows if not r["reference"])
    errors: dict[tuple, int] = defaultdict(int)
    for r in rows:
        if r["status"] != "ok" and not r["reference"]:
            for group in _groups(r.get("family", "?"), r.get("level"), levels):
                errors[(r["baseline"], r["comm"], r["n_agents"], *group)] += 1
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        for group in _groups(r["family"], r.get("level"), levels):
            groups[(r["baseline"], r["comm"], r["n_agents"], *group)].append(r)
    for key in errors:
        groups.setdefault(key, [])
    out = []
    # Per-family and overall records first, in the order they always had; then the levels.
    order = sorted(groups.items(), key=lambda kv: (kv[0][4] != "all", str(kv[0][:4]), kv[0][4]))
    for (baseline, comm, n, fam, level), members in order:
        rec: dict[str, Any] = {
            "baseline": baseline,
            "comm": comm,
            "n_agents": n,
            "family": fam,
            **({"level": level} if levels else {}),
            "episodes": len(members),
            "errors": errors[(baseline, comm, n, fam, level)],
        }
        for name in SUMMARY_METRICS:
            rec[name] = interval_cell([m.get(name) for m in members], metric(name))
        rec.update(
            run_metrics(load_trace(m) for m in members)
            if load_trace and members
            else dict.fromkeys(RUN_METRICS)
        )
        out.append(rec)
    return out


def _groups(family: str, level: int | None, levels: bool) -> list[tuple[str, str]]:
    """The (family, level) groups a row counts in: its family and 'all', and its level when
    the rows carry levels."""
    out = [(family, "all"), ("all", "all")]
    if levels and level is not None:
        out.append(("all", str(level)))
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
            for name in DELTA_METRICS:
                if on.get(name) is not None and off.get(name) is not None:
                    deltas[(baseline, n, fam)][name].append(on[name] - off[name])
    return [
        {
            "baseline": b,
            "n_agents": n,
            "family": fam,
            "pairs": len(next(iter(d.values()), [])),
            **{m: interval_cell(v, None) for m, v in d.items()},
        }
        for (b, n, fam), d in sorted(deltas.items(), key=lambda kv: str(kv[0]))
    ]


def _fmt(cell: Any) -> str:
    if not isinstance(cell, dict):
        return "" if cell is None else f"{cell:.3f}" if isinstance(cell, float) else str(cell)
    if cell["mean"] is None:
        return "-"
    return f"{cell['mean']:.3f} [{cell['lo']:.3f}, {cell['hi']:.3f}]"


GROUP_COLUMNS = ("baseline", "comm", "n_agents", "family", "episodes", "errors")
TABLE_COLUMNS = (*GROUP_COLUMNS, *(m.name for m in METRICS if m.headline))
# The scaling table of a run with several team sizes: time, speedup and interference per size.
SCALING_COLUMNS = (
    *GROUP_COLUMNS,
    *(
        metric(name).name
        for name in (
            "SR",
            "L",
            "speedup",
            "parallel_efficiency",
            "EI",
            "B",
            "blocked_ticks",
            "collisions",
        )
    ),
)


def scaling_records(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary records of the scaling table, grouped by baseline, comm and family and
    ordered by team size; none unless the run has several team sizes. Per-level records are
    left out (the main table has them)."""
    if len({r["n_agents"] for r in table}) < 2:
        return []
    records = [r for r in table if r.get("level", "all") == "all"]
    return sorted(
        records,
        key=lambda r: (r["baseline"], r["comm"], r["family"] != "all", r["family"], r["n_agents"]),
    )


def _markdown_table(columns: tuple[str, ...], records: list[dict[str, Any]]) -> list[str]:
    return markdown_table(columns, [[_fmt(r.get(c)) for c in columns] for r in records])


def _with_level(columns: tuple[str, ...], table: list[dict[str, Any]]) -> tuple[str, ...]:
    """``columns`` with a ``level`` column after ``family`` when the records have levels."""
    if not any("level" in r for r in table):
        return columns
    at = columns.index("family") + 1
    return (*columns[:at], "level", *columns[at:])


def write_summary(root: Path, table: list[dict[str, Any]], deltas: list[dict[str, Any]]) -> None:
    """``summary.md`` (readable) and ``summary.csv`` (mean, lo, hi columns per metric)."""
    exact = ", ".join(m.name for m in METRICS if m.interval == "clopper_pearson")
    lines = ["# Summary", "", f"Mean [95% interval]; {exact}: Clopper-Pearson, others: t.", ""]
    lines += _markdown_table(_with_level(TABLE_COLUMNS, table), table)
    scaling = scaling_records(table)
    if scaling:
        lines += ["", "## Scaling (per team size)", ""]
        lines += [
            "speedup = L_1 / L_n against the one-agent run on the same task, scene and seed; "
            "parallel_efficiency = speedup / n; EI = 1 - L_n / L_1; blocked_ticks and "
            "collisions are per episode, summed over agents.",
            "",
        ]
        lines += _markdown_table(SCALING_COLUMNS, scaling)
    if deltas:
        cols = ("baseline", "n_agents", "family", "pairs", *DELTA_METRICS)
        lines += ["", "## Communication ablation (comm on - comm off, paired)", ""]
        lines += _markdown_table(cols, deltas)
    (root / "summary.md").write_text("\n".join(lines) + "\n")
    with (root / "summary.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        head = [*_with_level(GROUP_COLUMNS, table), *RUN_METRICS]
        writer.writerow(head + [f"{m}_{p}" for m in SUMMARY_METRICS for p in ("mean", "lo", "hi")])
        for rec in table:
            cells = [rec[h] for h in head]
            for m in SUMMARY_METRICS:
                cells += [rec[m]["mean"], rec[m]["lo"], rec[m]["hi"]]
            writer.writerow(cells)
