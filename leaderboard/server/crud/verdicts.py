"""A verification's verdict written in one transaction: per-episode results, the state, and
the entry, a reproduction or a refusal of copied traces."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from leaderboard.server.crud.common import utcnow
from leaderboard.server.db.models import Entry, EpisodeResult, Submission, Team
from leaderboard.server.db.session import begin_write

# Prefix of the PostgreSQL advisory lock keys that serialise the verdicts of one track.
VERDICT_LOCK = "leaderboard verdicts of track "
COPIES_NAMED = 3  # entries a plagiarism refusal names (the rest are counted)


class EpisodeOutcome(Protocol):
    """What a verdict says about one episode (``leaderboard.core.verify.EpisodeCheck``)."""

    key: str
    ok: bool
    reasons: tuple[str, ...]
    metrics: dict[str, Any]
    trace_hash: str


def traces_digest(trace_hashes: Collection[str]) -> str:
    """One hash for a set of run-episode trace hashes (equal sets, equal digests)."""
    return hashlib.sha256("\n".join(sorted(trace_hashes)).encode()).hexdigest()


def record_verdict(
    session: Session,
    submission_id: int,
    *,
    ok: bool,
    reason: str,
    episodes: Sequence[EpisodeOutcome],
    summary: dict[str, Any] | None = None,
    trace_hashes: Collection[str] = (),
    now: datetime | None = None,
) -> Submission:
    """Write a verification's outcome in one transaction: the per-episode results, the state
    (``verified`` if ``ok``, else ``rejected`` with ``reason``) and, for a verified
    submission, its entry (with ``summary``), unless

    - an entry of the same track has the same run-episode traces (``trace_hashes``, the whole
      set): then the submission is verified and recorded as a reproduction of that entry's
      submission (by the entry's own team too, which :func:`reproductions` does not count);
    - some of its run-episode traces are those of another team's entry: then it is
      ``rejected`` with :func:`copied_from`'s reason naming the entry, and gets no entry.

    Verified verdicts of one track are written one at a time (see the module docstring), so
    two submissions racing with each other's traces never both get an entry. Only a
    ``verifying`` submission takes a verdict."""
    begin_write(session)
    now = now or utcnow()
    submission = session.scalars(
        select(Submission).where(Submission.id == submission_id).with_for_update()
    ).one_or_none()
    if submission is None or submission.state != "verifying":
        state = None if submission is None else submission.state
        session.rollback()
        raise ValueError(f"submission {submission_id} is {state or 'unknown'}, not verifying")
    if ok and (summary is None or not trace_hashes):
        session.rollback()
        raise ValueError("a verified submission needs its summary and trace hashes")
    session.add_all(
        EpisodeResult(
            submission_id=submission_id,
            key=e.key,
            ok=e.ok,
            reasons=list(e.reasons),
            metrics=dict(e.metrics),
            trace_hash=e.trace_hash,
        )
        for e in episodes
    )
    submission.state = "verified" if ok else "rejected"
    submission.reason = reason
    submission.updated_at = now
    if ok and summary is not None:
        _lock_track(session, submission.track)
        digest = traces_digest(trace_hashes)
        original = _entry_with_traces(session, submission.track, digest)
        if original is not None:
            submission.reproduction_of_id = original.submission_id
        elif (
            copied := _copies(session, submission.team_id, submission.track, trace_hashes)
        ) is not None:
            submission.state = "rejected"
            submission.reason = copied
        else:
            session.add(
                Entry(
                    submission_id=submission_id,
                    team_id=submission.team_id,
                    track=submission.track,
                    suite_version=submission.suite_version,
                    summary=summary,
                    traces_digest=digest,
                    created_at=now,
                )
            )
    session.commit()
    return submission


def _lock_track(session: Session, track: str) -> None:
    """Hold the track's verdict lock until the transaction ends (PostgreSQL: an advisory lock
    keyed by the track; SQLite's write transaction already excludes every other writer)."""
    if session.get_bind().dialect.name == "postgresql":
        digest = hashlib.sha256(f"{VERDICT_LOCK}{track}".encode()).digest()
        key = int.from_bytes(digest[:8], "big", signed=True)
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def _entry_with_traces(session: Session, track: str, digest: str) -> Entry | None:
    return session.scalars(
        select(Entry).where(Entry.track == track, Entry.traces_digest == digest)
    ).one_or_none()


def copied_from(
    session: Session, team_id: int, track: str, run_trace_hashes: Collection[str]
) -> str | None:
    """Why a submission of ``team_id`` on ``track`` whose run episodes have the trace hashes
    ``run_trace_hashes`` takes credit for another team's work, or None when it does not.

    It does when some of its traces are those of another team's entry on the track (the
    bundles on the board are public) without being that entry's whole set: a whole set is a
    reproduction of the entry, and a team's own entries are its own. The answer names the
    entries copied (id, team, how many of the submission's run episodes), most copied first,
    each trace counted once, for the earliest entry holding it; past COPIES_NAMED entries the
    rest are counted."""
    if _entry_with_traces(session, track, traces_digest(run_trace_hashes)) is not None:
        return None
    return _copies(session, team_id, track, run_trace_hashes)


def _copies(
    session: Session, team_id: int, track: str, run_trace_hashes: Collection[str]
) -> str | None:
    """:func:`copied_from` once the whole set is known not to be an entry's."""
    hashes = sorted(set(run_trace_hashes))
    holders = session.execute(
        select(EpisodeResult.trace_hash, Entry.id, Team.name)
        .join(Entry, Entry.submission_id == EpisodeResult.submission_id)
        .join(Team, Team.id == Entry.team_id)
        .where(
            Entry.track == track,
            Entry.team_id != team_id,
            EpisodeResult.trace_hash.in_(hashes),
        )
        .order_by(Entry.id)
    ).all()
    first: dict[str, tuple[int, str]] = {}  # each trace is credited to its earliest entry
    for trace, entry, name in holders:
        first.setdefault(trace, (entry, name))
    if not first:
        return None
    counted = Counter(first.values())
    copied = sorted(counted.items(), key=lambda item: (-item[1], item[0][0]))
    named = "; ".join(
        f"{count} of its {len(hashes)} run episodes are traces of entry {entry} by team {name!r}"
        for (entry, name), count in copied[:COPIES_NAMED]
    )
    more = len(copied) - COPIES_NAMED
    return (
        f"{named}{f'; and traces of {more} more entries' if more > 0 else ''}: a submission is "
        "credited only with its team's own traces (the whole set of an entry's traces is a "
        "reproduction of it)"
    )
