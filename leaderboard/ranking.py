"""Ranking a track: SR with its Wilson 95% interval, tied ranks, and the track's table.

- SR's interval is the Wilson score interval (it stays inside [0, 1] and, unlike the normal
  approximation, does not collapse to a point at 0 or n successes).
- Every other per-episode metric is a mean with a Student-t 95% interval
  (:func:`benchmark.stats.t_interval`), clipped to the metric's range; speedup, parallel
  efficiency and EI join each episode with its one-agent reference, as the runner does.
- rank = 1 + the number of entries whose SR lower bound is above this entry's SR upper bound:
  entries whose intervals overlap share a rank, and a rank says how many entries are
  significantly better, not the order of the means.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from benchmark.metric_specs import at_level, metric
from benchmark.metrics import run_metrics
from benchmark.runner.references import with_reference
from benchmark.stats import t_interval
from leaderboard.db.models import Entry

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
SR_INTERVAL = "Wilson score 95%"
OTHER_INTERVAL = "Student-t 95%"
# Per-episode metrics, the reference ones included, in declaration order.
EPISODE_METRICS = tuple(m.name for m in at_level("episode", "reference"))
RUN_METRICS = tuple(m.name for m in at_level("run"))


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a success rate: ``successes`` of ``n`` trials; (0, 1)
    without trials."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} must be in [0, n={n}]")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0 (or n) successes the bound is exactly 0 (or 1); rounding would leave it a hair off.
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def ranks(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """For each ``(lo, hi)``, 1 + the number of intervals whose ``lo`` is above its ``hi``."""
    return [1 + sum(lo > hi for lo, _ in intervals) for _, hi in intervals]


def _sr_cell(values: list[Any]) -> dict[str, Any]:
    present = [v for v in values if v is not None]
    successes = int(sum(v == 1 for v in present))
    lo, hi = wilson(successes, len(present))
    mean = successes / len(present) if present else None
    return {"mean": mean, "lo": lo, "hi": hi, "n": len(present), "successes": successes}


def _t_cell(name: str, values: list[Any]) -> dict[str, Any]:
    present = [float(v) for v in values if v is not None]
    if not present:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    lo, hi = metric(name).range.clip(*t_interval(present))
    return {"mean": float(np.mean(present)), "lo": lo, "hi": hi, "n": len(present)}


def entry_summary(
    rows: Sequence[Mapping[str, Any]], traces: Mapping[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The summary of a verified submission, per family and over ``all``.

    Args:
        rows: the bundle's rows (run and reference episodes, ``status`` ok) with the metrics
            the server recomputed in place of the submitted ones.
        traces: row key -> trace, for the run-level metrics (None: they stay None).

    Returns:
        ``{"intervals": {...}, "episodes": n, "families": {family: {metric: cell}}}``; a cell
        is ``{"mean", "lo", "hi", "n"}`` (SR's also ``successes``), ``mean`` None when no
        episode defines the metric; run-level metrics are plain values.
    """
    results = with_reference([dict(r) for r in rows])
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in results:
        groups[row["family"]].append(row)
        groups["all"].append(row)
    families = {}
    for family, members in sorted(groups.items()):
        cells: dict[str, Any] = {"episodes": len(members)}
        for name in EPISODE_METRICS:
            values = [m.get(name) for m in members]
            cells[name] = _sr_cell(values) if name == "SR" else _t_cell(name, values)
        if traces is None:
            cells.update(dict.fromkeys(RUN_METRICS))
        else:
            cells.update(run_metrics(traces[m["key"]] for m in members))
        families[family] = cells
    return {
        "intervals": {"SR": SR_INTERVAL, "other": OTHER_INTERVAL},
        "episodes": len(results),
        "families": families,
    }


@dataclass(frozen=True)
class TableRow:
    """One entry in its track's table (``metrics``: the ``all`` cells of its summary)."""

    rank: int
    entry_id: int
    submission_id: int
    team: str
    method: str
    model: str
    sr: dict[str, Any]
    metrics: dict[str, Any]
    llm_tokens: int | None  # self-reported
    wall_time_s: float | None  # self-reported
    attempts: int
    created_at: datetime
    reproductions: int = 0  # submissions recorded as reproductions of the entry


def track_table(
    entries: Sequence[Entry], attempts: Mapping[int, int] | None = None
) -> list[TableRow]:
    """The ranked table of one track's entries (with their team and submission loaded),
    best first: by rank, then SR, then the earlier entry. ``attempts``: team id ->
    submissions the team made on the track. Entries of several tracks are refused."""
    tracks = sorted({e.track for e in entries})
    if len(tracks) > 1:
        raise ValueError(f"a table holds one track; got entries of {tracks}")
    overall = [e.summary["families"]["all"] for e in entries]
    rows = [
        TableRow(
            rank=rank,
            entry_id=e.id,
            submission_id=e.submission_id,
            team=e.team.name,
            method=e.submission.method,
            model=e.submission.model,
            sr=cells["SR"],
            metrics=cells,
            llm_tokens=e.submission.llm_tokens,
            wall_time_s=e.submission.wall_time_s,
            attempts=(attempts or {}).get(e.team_id, 0),
            created_at=e.created_at,
        )
        for e, cells, rank in zip(
            entries, overall, ranks([(c["SR"]["lo"], c["SR"]["hi"]) for c in overall]), strict=True
        )
    ]
    return sorted(rows, key=lambda r: (r.rank, -(r.sr["mean"] or 0.0), r.created_at, r.entry_id))
