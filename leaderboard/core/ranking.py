"""Ranking a track: each metric's 95% interval as its declaration says, tied ranks, and the
track's table.

- Every per-episode metric's interval is the one :mod:`benchmark.metrics.specs` declares for it
  (``MetricSpec.interval``), computed as the run summaries compute it
  (:func:`benchmark.results.summary.interval_cell`) and clipped to the metric's range: SR's is
  the Clopper-Pearson (exact binomial) interval, every other metric's the Student-t interval of
  its mean. Speedup, parallel efficiency and EI join each episode with its one-agent reference,
  as the runner does.
- A Student-t interval needs at least two values: a cell of one value keeps its mean and ``n``
  but has no bounds (a zero-width ``[x, x]`` would claim a certainty one episode cannot give).
- rank = 1 + the number of entries whose SR lower bound is above this entry's SR upper bound:
  entries whose intervals overlap share a rank, and a rank says how many entries are
  significantly better, not the order of the means.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from benchmark.metrics.episode import run_metrics
from benchmark.metrics.specs import at_level, metric
from benchmark.results.references import with_reference
from benchmark.results.summary import interval_cell

# How each declared interval method is named on the pages, in the API and in the export.
INTERVAL_NAMES = {"clopper_pearson": "Clopper-Pearson 95%", "t": "Student-t 95%"}
# Per-episode metrics, the reference ones included, in declaration order.
EPISODE_METRICS = tuple(m.name for m in at_level("episode", "reference"))
RUN_METRICS = tuple(m.name for m in at_level("run"))
# Per-episode metric -> how its interval is computed (what a summary's "intervals" holds).
INTERVALS = {name: INTERVAL_NAMES[metric(name).interval] for name in EPISODE_METRICS}
MIN_T_VALUES = 2  # a Student-t interval needs a standard deviation


def interval_caption(intervals: Mapping[str, str]) -> str:
    """``intervals`` (metric -> method) in words: the metrics of the less common methods by
    name, the most common method as "every other metric", e.g. ``SR: Clopper-Pearson 95%;
    every other metric: Student-t 95%``."""
    if not intervals:
        return ""
    counts = Counter(intervals.values())
    common = counts.most_common(1)[0][0]
    named = defaultdict(list)
    for name, method in intervals.items():
        if method != common:
            named[method].append(name)
    parts = [f"{', '.join(names)}: {method}" for method, names in named.items()]
    rest = "every other metric" if parts else "every metric"
    return "; ".join([*parts, f"{rest}: {common}"])


def metric_cell(name: str, values: Sequence[Any]) -> dict[str, Any]:
    """The mean and 95% interval of metric ``name`` over ``values`` (None: undefined in that
    episode), by the metric's declared interval method.

    Returns:
        ``{"mean", "lo", "hi", "n"}``, ``n`` the values present; all but ``n`` None without
        values; ``lo`` and ``hi`` None for a Student-t cell of fewer than MIN_T_VALUES values.
        A Clopper-Pearson cell (SR) also holds ``successes``, the values equal to 1.
    """
    spec = metric(name)
    cell = interval_cell(list(values), spec)
    if spec.interval == "clopper_pearson":
        cell["successes"] = int(sum(v == 1 for v in values if v is not None))
    elif cell["n"] < MIN_T_VALUES:
        cell["lo"] = cell["hi"] = None
    return cell


def sr_interval(successes: int, n: int) -> tuple[float, float]:
    """SR's 95% interval for ``successes`` of ``n`` episodes, by SR's declared method."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} must be in [0, n={n}]")
    if n == 0:
        return 0.0, 1.0
    cell = metric_cell("SR", [1.0] * successes + [0.0] * (n - successes))
    return cell["lo"], cell["hi"]


def ranks(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """For each ``(lo, hi)``, 1 + the number of intervals whose ``lo`` is above its ``hi``."""
    return [1 + sum(lo > hi for lo, _ in intervals) for _, hi in intervals]


def entry_summary(
    rows: Sequence[Mapping[str, Any]], traces: Mapping[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The summary of a verified submission, per family and over ``all``.

    Args:
        rows: the bundle's rows (run and reference episodes, ``status`` ok) with the metrics
            the server recomputed in place of the submitted ones.
        traces: row key -> trace, for the run-level metrics (None: they stay None).

    Returns:
        ``{"intervals": {metric: method}, "episodes": n, "families": {family: {metric:
        cell}}}``; a cell is :func:`metric_cell`'s; run-level metrics are plain values.
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
            cells[name] = metric_cell(name, [m.get(name) for m in members])
        if traces is None:
            cells.update(dict.fromkeys(RUN_METRICS))
        else:
            cells.update(run_metrics(traces[m["key"]] for m in members))
        families[family] = cells
    return {"intervals": dict(INTERVALS), "episodes": len(results), "families": families}


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
    reproductions: int = 0  # other teams whose verified traces equal the entry's


class Entry(Protocol):
    """What ranking reads of a board entry (the server's ``db.models.Entry``, with its team and
    submission loaded): the core knows no database."""

    id: int
    team_id: int
    submission_id: int
    track: str
    summary: dict[str, Any]
    created_at: datetime
    team: Any  # .name
    submission: Any  # .method, .model, .llm_tokens, .wall_time_s


def track_table(
    entries: Sequence[Entry], attempts: Mapping[int, int] | None = None
) -> list[TableRow]:
    """The ranked table of one track's entries (with their team and submission loaded),
    best first: by rank, then SR, then the earlier entry. ``attempts``: team id -> the
    team's attempts on the track. Entries of several tracks are refused."""
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


def all_tied(rows: Sequence[TableRow]) -> bool:
    """Whether the table cannot separate its entries: two or more, every one of rank 1 (each
    SR interval overlaps every other)."""
    return len(rows) >= 2 and all(r.rank == 1 for r in rows)
