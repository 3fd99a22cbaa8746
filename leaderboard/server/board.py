"""The board as plain data: the tracks, a track's ranked table, an entry and a submission.

The JSON API (:mod:`leaderboard.server.api.board`) and the pages
(:mod:`leaderboard.server.web.pages`) both show these views, so a number on a page is the number the
API gives. Tracks are grouped by suite and version: tables of different suite versions are never
mixed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from benchmark.results.suite import suites
from leaderboard.core.ranking import INTERVALS, TableRow, all_tied, sr_interval, track_table
from leaderboard.core.tracks import Track
from leaderboard.server import crud
from leaderboard.server.db.models import Entry

# The table's columns a client may sort by; a metric column sorts by its mean over all episodes.
METRIC_COLUMNS = {
    "SR": "SR",
    "TR": "TR",
    "C": "C",
    "B": "B",
    "L": "L",
    "speedup": "speedup",
    "EI": "EI",
    "comm_tokens": "message_tokens",
}
SORT_COLUMNS = (
    "rank",
    *METRIC_COLUMNS,
    "llm_tokens",
    "wall_time_s",
    "team",
    "method",
    "attempts",
    "reproductions",
    "created",
)
ORDERS = ("asc", "desc")
# Columns where more is better: a first click sorts them descending.
DESCENDING_FIRST = frozenset({"SR", "TR", "C", "B", "speedup", "EI", "reproductions"})


class SortError(ValueError):
    """A sort column or order the table does not have; ``field`` names the query parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class TrackInfo:
    """A track of the board (the fields of :class:`leaderboard.core.tracks.Track`), its number of
    entries, and whether its suite hides its seeds (episodes come from challenges)."""

    key: str
    suite: str
    suite_version: str
    n_agents: int
    comm: bool
    observability: str
    action_level: str
    entries: int
    hidden_seeds: bool

    @classmethod
    def of(cls, key: str, entries: int) -> TrackInfo:
        track = Track.from_key(key)
        suite = suites().get(track.suite)
        return cls(
            key=key,
            suite=track.suite,
            suite_version=track.suite_version,
            n_agents=track.n_agents,
            comm=track.comm,
            observability=track.observability,
            action_level=track.action_level,
            entries=entries,
            hidden_seeds=suite is not None and suite.hidden,
        )


@dataclass(frozen=True)
class SuiteVersion:
    """The tracks of one suite version (one group of the front page)."""

    suite: str
    suite_version: str
    tracks: tuple[TrackInfo, ...]


def _natural(text: str) -> tuple[Any, ...]:
    """A sort key ordering ``v2`` before ``v10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def suite_versions(session: Session) -> list[SuiteVersion]:
    """Every track with entries, grouped by suite and version: suites by name, the newest
    version of each first, tracks by key within a version."""
    groups: dict[tuple[str, str], list[TrackInfo]] = {}
    for key, count in crud.tracks(session):
        info = TrackInfo.of(key, count)
        groups.setdefault((info.suite, info.suite_version), []).append(info)
    order = sorted(groups, key=lambda g: _natural(g[1]), reverse=True)
    order.sort(key=lambda g: g[0])  # stable: versions stay newest first within a suite
    return [SuiteVersion(suite, version, tuple(groups[suite, version])) for suite, version in order]


def track_info(session: Session, key: str) -> TrackInfo | None:
    """The track ``key`` if it has entries, else None."""
    counts = dict(crud.tracks(session))
    return TrackInfo.of(key, counts[key]) if key in counts else None


# --- a track's table --------------------------------------------------------------------------


# A row of a track's table, with the number of other teams reproducing the entry.
BoardRow = TableRow


@dataclass(frozen=True)
class TrackTable:
    """A track's table, sorted by ``sort`` in ``order`` (``asc`` or ``desc``).

    Attributes:
        intervals: per-episode metric -> how its 95% interval is computed.
        all_tied: the table cannot separate its entries: two or more, all of rank 1
            (:func:`leaderboard.core.ranking.all_tied`).
        episodes: the fewest run episodes an entry of the track holds.
        zero_sr: SR's interval at 0 successes of ``episodes``: the narrowest an SR interval of
            the track can be, which says how far apart two entries must be to be separated.
    """

    track: TrackInfo
    sort: str
    order: str
    rows: tuple[BoardRow, ...]
    intervals: dict[str, str]
    all_tied: bool
    episodes: int
    zero_sr: tuple[float, float]


def default_order(column: str) -> str:
    """The order a column is first sorted in: descending where more is better."""
    return "desc" if column in DESCENDING_FIRST else "asc"


def column_value(row: BoardRow, column: str) -> Any:
    """The value ``row`` is sorted by in ``column`` (None when undefined)."""
    if column in METRIC_COLUMNS:
        cell = row.metrics.get(METRIC_COLUMNS[column]) or {}
        return cell.get("mean")
    if column in ("team", "method"):
        return getattr(row, column).casefold()
    if column == "created":
        return row.created_at
    return getattr(row, column)


def check_sort(sort: str, order: str | None) -> tuple[str, str]:
    """``(sort, order)`` with the column's default order when ``order`` is None; SortError
    naming the parameter when either is not one the table has."""
    if sort not in SORT_COLUMNS:
        raise SortError("sort", f"sort: {sort!r} is not a column; columns are {list(SORT_COLUMNS)}")
    order = order or default_order(sort)
    if order not in ORDERS:
        raise SortError("order", f"order: {order!r} must be one of {list(ORDERS)}")
    return sort, order


def sort_rows(rows: Sequence[BoardRow], sort: str, order: str) -> list[BoardRow]:
    """``rows`` sorted by column ``sort`` in ``order``; rows without a value come last (in
    either order), and equal values keep the ranked order."""
    sort, order = check_sort(sort, order)
    present = [r for r in rows if column_value(r, sort) is not None]
    missing = [r for r in rows if column_value(r, sort) is None]
    ordered = sorted(present, key=lambda r: column_value(r, sort), reverse=order == "desc")
    return ordered + missing


def ranked_rows(session: Session, key: str) -> list[BoardRow]:
    """The rows of track ``key``, best first (:func:`leaderboard.core.ranking.track_table`), each
    with the number of other teams that reproduced it."""
    table = track_table(crud.track_entries(session, key), crud.attempts(session, key))
    counts = crud.reproduction_counts(session, [r.submission_id for r in table])
    return [replace(r, reproductions=counts.get(r.submission_id, 0)) for r in table]


def track_view(
    session: Session, key: str, sort: str = "rank", order: str | None = None
) -> TrackTable | None:
    """The table of track ``key`` sorted by ``sort`` (one of SORT_COLUMNS) in ``order`` (the
    column's default when None); None when the track has no entries. SortError on a bad
    column or order."""
    sort, order = check_sort(sort, order)
    info = track_info(session, key)
    if info is None:
        return None
    ranked = ranked_rows(session, key)
    episodes = min(r.sr["n"] for r in ranked)
    return TrackTable(
        info,
        sort,
        order,
        tuple(sort_rows(ranked, sort, order)),
        dict(INTERVALS),
        all_tied(ranked),
        episodes,
        sr_interval(0, episodes),
    )


# --- an entry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reproduction:
    """Another team's verified submission whose run-episode traces equal an entry's: what it
    adds is an independent team, its own code, paper and description of the method, and its
    own report of the resources the run took (self-reported, not verified)."""

    submission_id: int
    team: str
    created_at: datetime
    method: str
    model: str
    description: str
    code_url: str | None
    paper_url: str | None
    llm_tokens: int | None
    wall_time_s: float | None


@dataclass(frozen=True)
class EntryView:
    """An entry with everything its page shows.

    Attributes:
        families: family (and ``all``) -> ``{"episodes": n, metric: cell | value}`` as in
            :func:`leaderboard.core.ranking.entry_summary`: a cell is ``{"mean", "lo", "hi", "n"}``.
        intervals: per-episode metric -> how its 95% interval was computed.
        episodes: run episodes (references not counted).
        llm_tokens: LLM tokens the run used, as reported by the team (not verified).
        wall_time_s: seconds the run took, as reported by the team (not verified).
        rank: within its track (tied entries share a rank).
        attempts: the team's attempts on the track (:func:`leaderboard.server.crud.attempts`).
        reproductions: one per other team that reproduced the entry, the earliest of each.
    """

    id: int
    submission_id: int
    track: TrackInfo
    rank: int
    team: str
    method: str
    description: str
    model: str
    parameters: int | None
    code_url: str | None
    paper_url: str | None
    created_at: datetime
    episodes: int
    families: dict[str, dict[str, Any]]
    intervals: dict[str, str]
    attempts: int
    reproductions: tuple[Reproduction, ...]
    llm_tokens: int | None
    wall_time_s: float | None
    bundle_path: str
    bundle_sha256: str


def get_entry(session: Session, entry_id: int) -> Entry | None:
    """The entry ``entry_id`` with its team and submission."""
    return session.get(Entry, entry_id)


def stored_bundle(data_dir: Path, bundle_path: str) -> Path | None:
    """The stored bundle file ``bundle_path`` (relative to ``data_dir``) names, if it exists
    inside ``data_dir``, else None."""
    root = data_dir.resolve()
    path = (root / bundle_path).resolve()
    if not path.is_relative_to(root) or not path.is_file():
        return None
    return path


def entry_view(session: Session, entry_id: int) -> EntryView | None:
    """Entry ``entry_id`` as its page shows it; None when there is none."""
    entry = get_entry(session, entry_id)
    if entry is None:
        return None
    rows = ranked_rows(session, entry.track)
    row = next(r for r in rows if r.entry_id == entry.id)
    submission = entry.submission
    return EntryView(
        id=entry.id,
        submission_id=submission.id,
        track=TrackInfo.of(entry.track, len(rows)),
        rank=row.rank,
        team=entry.team.name,
        method=submission.method,
        description=submission.description,
        model=submission.model,
        parameters=submission.parameters,
        code_url=submission.code_url,
        paper_url=submission.paper_url,
        created_at=entry.created_at,
        episodes=entry.summary.get("episodes", 0),
        families=entry.summary["families"],
        intervals=entry.summary.get("intervals", INTERVALS),
        attempts=row.attempts,
        reproductions=tuple(
            Reproduction(
                submission_id=s.id,
                team=s.team.name,
                created_at=s.created_at,
                method=s.method,
                model=s.model,
                description=s.description,
                code_url=s.code_url,
                paper_url=s.paper_url,
                llm_tokens=s.llm_tokens,
                wall_time_s=s.wall_time_s,
            )
            for s in crud.reproductions(session, submission.id)
        ),
        llm_tokens=submission.llm_tokens,
        wall_time_s=submission.wall_time_s,
        bundle_path=submission.bundle_path,
        bundle_sha256=submission.bundle_sha256,
    )


def episode_metrics(session: Session, submission_id: int) -> dict[str, dict[str, Any]]:
    """The metrics the server recomputed for each verified episode of ``submission_id``, by
    the episode's row key."""
    submission = crud.get_submission(session, submission_id)
    if submission is None:
        return {}
    return {e.key: e.metrics for e in submission.episodes if e.ok}


def plot_series(
    session: Session, entry_id: int, others: int
) -> tuple[str, dict[str, Any], dict[str, dict[str, Any]]] | None:
    """What the entry's metrics plot compares: its label and ``all`` cells, and those of the
    ``others`` best-ranked other entries of its track, each labelled ``#<id> <method>``
    (None when there is no such entry)."""
    entry = get_entry(session, entry_id)
    if entry is None:
        return None
    rows = ranked_rows(session, entry.track)
    mine = next(r for r in rows if r.entry_id == entry_id)
    rest = [r for r in rows if r.entry_id != entry_id][:others]
    return (
        f"#{mine.entry_id} {mine.method}",
        mine.metrics,
        {f"#{r.entry_id} {r.method}": r.metrics for r in rest},
    )


# --- a submission -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeState:
    """One episode's verification: ``reasons`` name the field that failed."""

    key: str
    ok: bool
    reasons: tuple[str, ...]
    metrics: dict[str, Any]  # recomputed by the server; empty when not ok


@dataclass(frozen=True)
class SubmissionView:
    """A submission's state as its page shows it (``reproduces``: the entry it reproduces)."""

    id: int
    team: str
    track: str
    suite: str
    suite_version: str
    state: str
    reason: str
    method: str
    model: str
    challenge: str | None
    created_at: datetime
    updated_at: datetime
    episodes: tuple[EpisodeState, ...]
    entry: int | None
    rank: int | None
    reproduces: int | None


def submission_view(session: Session, submission_id: int) -> SubmissionView | None:
    """Submission ``submission_id`` with its per-episode results; None when there is none."""
    submission = crud.get_submission(session, submission_id)
    if submission is None:
        return None
    reproduces = None
    if submission.reproduction_of_id is not None:
        reproduces = session.scalar(
            select(Entry.id).where(Entry.submission_id == submission.reproduction_of_id)
        )
    entry, rank = submission.entry, None
    if entry is not None:
        rank = next(r.rank for r in ranked_rows(session, entry.track) if r.entry_id == entry.id)
    return SubmissionView(
        id=submission.id,
        team=submission.team.name,
        track=submission.track,
        suite=submission.suite,
        suite_version=submission.suite_version,
        state=submission.state,
        reason=submission.reason,
        method=submission.method,
        model=submission.model,
        challenge=submission.challenge_id,
        created_at=submission.created_at,
        updated_at=submission.updated_at,
        episodes=tuple(
            EpisodeState(e.key, e.ok, tuple(e.reasons), e.metrics) for e in submission.episodes
        ),
        entry=entry.id if entry is not None else None,
        rank=rank,
        reproduces=reproduces,
    )
