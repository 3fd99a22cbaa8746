"""``GET /api/export``: every verified result of the board as one checksummed zip archive.

Members, in this order:

* ``README.txt``: what the files hold and how the intervals were computed;
* ``entries.csv``: one row per entry (every track), in each track's ranked order: the entry's
  mean, lower and upper 95% bound of every per-episode metric over all its run episodes, the
  run-level metrics, and the LLM tokens and wall time its team reported (not verified);
* ``episodes.csv``: one row per episode of every entry, with the metrics the server recomputed
  by replaying the episode's trace (no submitted number);
* ``SHA256SUMS``: the sha256 of every other member, in ``sha256sum -c`` format.

The archive is a function of the database alone (members in a fixed order, fixed timestamps),
so the same data gives the same bytes and the same sha256. Text cells a spreadsheet would run
as a formula (starting with ``= + - @``, a tab or a carriage return) are prefixed with ``'``;
numbers are written as numbers.
"""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from benchmark.metrics.episode import METRIC_NAMES
from leaderboard.core.ranking import EPISODE_METRICS, INTERVALS, RUN_METRICS, interval_caption
from leaderboard.server import board, crud
from leaderboard.server.db.models import Entry, EpisodeResult, Submission

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# Zip's earliest date: the members carry no time of export, so equal data give equal bytes.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
SUMS = "SHA256SUMS"

ENTRY_COLUMNS = (
    "track",
    "suite",
    "suite_version",
    "n_agents",
    "comm",
    "observability",
    "action_level",
    "rank",
    "entry_id",
    "submission_id",
    "team",
    "method",
    "model",
    "parameters",
    "code_url",
    "paper_url",
    "episodes",
    "SR_successes",
    *(f"{m}_{part}" for m in EPISODE_METRICS for part in ("mean", "lo", "hi", "n")),
    *RUN_METRICS,
    "llm_tokens_self_reported",
    "wall_time_s_self_reported",
    "attempts",
    "reproductions",
    "created_at",
)
EPISODE_COLUMNS = (
    "track",
    "entry_id",
    "submission_id",
    "team",
    "method",
    "key",
    "trace_hash",
    *METRIC_NAMES,
)

README = f"""collab-bench leaderboard export

entries.csv   one row per entry, in each track's ranked order. <metric>_mean/_lo/_hi/_n: the
              mean over the entry's run episodes, its 95% interval and the number of episodes
              that define the metric. Each metric's interval is the one its declaration
              (benchmark/metrics/specs.py) names:
              {interval_caption(INTERVALS)}.
              A Student-t interval needs two values: with one, _lo and _hi are empty.
              rank = 1 + the number of entries of the track whose SR lower bound is above this
              entry's SR upper bound (overlapping entries share a rank). attempts: the team's
              submissions to the track in every state; on a hidden-seed track, every challenge
              the team drew for the suite, answered or not. reproductions: other teams whose
              verified traces equal the entry's (a team's own resubmissions do not count).
              llm_tokens_self_reported and wall_time_s_self_reported are as the team reported
              them; the server does not verify them.
episodes.csv  one row per episode (run and one-agent reference) of every entry, with the
              metrics the server recomputed by replaying the episode's trace.
SHA256SUMS    the sha256 of every other member (sha256sum -c SHA256SUMS).

Text cells starting with = + - @, a tab or a carriage return are prefixed with ' so that a
spreadsheet shows them as text.
"""


def defuse(value: Any) -> Any:
    """A CSV cell for ``value``: text that a spreadsheet would run as a formula gets a leading
    ``'``; numbers stay numbers (a negative number is not text); None is an empty cell;
    booleans are ``true``/``false``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def to_csv(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> bytes:
    """UTF-8 CSV with a header line; every cell through :func:`defuse`."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([defuse(row.get(c)) for c in columns])
    return out.getvalue().encode("utf-8")


def entry_rows(session: Session) -> list[dict[str, Any]]:
    """One dict per entry of the board (keys of ENTRY_COLUMNS), tracks by key, each in its
    ranked order."""
    entries = {
        e.id: e for e in session.scalars(select(Entry).options(selectinload(Entry.submission)))
    }
    out = []
    for key, count in crud.tracks(session):
        info = board.TrackInfo.of(key, count)
        for row in board.ranked_rows(session, key):
            submission = entries[row.entry_id].submission
            cells = row.metrics
            line = {
                "track": key,
                "suite": info.suite,
                "suite_version": info.suite_version,
                "n_agents": info.n_agents,
                "comm": info.comm,
                "observability": info.observability,
                "action_level": info.action_level,
                "rank": row.rank,
                "entry_id": row.entry_id,
                "submission_id": row.submission_id,
                "team": row.team,
                "method": row.method,
                "model": row.model,
                "parameters": submission.parameters,
                "code_url": submission.code_url,
                "paper_url": submission.paper_url,
                "episodes": cells.get("episodes"),
                "SR_successes": row.sr.get("successes"),
                "llm_tokens_self_reported": row.llm_tokens,
                "wall_time_s_self_reported": row.wall_time_s,
                "attempts": row.attempts,
                "reproductions": row.reproductions,
                "created_at": row.created_at.isoformat(),
            }
            for name in EPISODE_METRICS:
                cell = cells.get(name) or {}
                for part in ("mean", "lo", "hi", "n"):
                    line[f"{name}_{part}"] = cell.get(part)
            for name in RUN_METRICS:
                line[name] = cells.get(name)
            out.append(line)
    return out


def episode_rows(session: Session) -> list[dict[str, Any]]:
    """One dict per episode result of every entry's submission (keys of EPISODE_COLUMNS), by
    track, entry and the order the verdict recorded them."""
    results = session.execute(
        select(Entry, EpisodeResult)
        .join(Submission, Submission.id == Entry.submission_id)
        .join(EpisodeResult, EpisodeResult.submission_id == Submission.id)
        .options(selectinload(Entry.team), selectinload(Entry.submission))
        .where(EpisodeResult.ok.is_(True))
        .order_by(Entry.track, Entry.id, EpisodeResult.id)
    )
    return [
        {
            "track": entry.track,
            "entry_id": entry.id,
            "submission_id": entry.submission_id,
            "team": entry.team.name,
            "method": entry.submission.method,
            "key": result.key,
            "trace_hash": result.trace_hash,
            **{name: result.metrics.get(name) for name in METRIC_NAMES},
        }
        for entry, result in results
    ]


def _sums(members: dict[str, bytes]) -> bytes:
    return "".join(
        f"{hashlib.sha256(blob).hexdigest()}  {name}\n" for name, blob in members.items()
    ).encode()


def zip_members(members: dict[str, bytes]) -> bytes:
    """A zip of ``members`` in order, with fixed timestamps and permissions."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, blob in members.items():
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, blob)
    return out.getvalue()


def export_archive(session: Session) -> tuple[bytes, str]:
    """The export zip of every verified result, and its sha256 (hex)."""
    members = {
        "README.txt": README.encode(),
        "entries.csv": to_csv(ENTRY_COLUMNS, entry_rows(session)),
        "episodes.csv": to_csv(EPISODE_COLUMNS, episode_rows(session)),
    }
    members[SUMS] = _sums(members)
    data = zip_members(members)
    return data, hashlib.sha256(data).hexdigest()
