"""Plain functions over the leaderboard's tables; the routes, the workers and the admin CLI call
them. Each function that writes runs in its own write transaction
(:func:`leaderboard.db.session.begin_write`, which first commits what the session holds open)
and commits it, so nobody ever sees half of it.

Refusals a client can cause (a taken team name, a foreign, expired or reused challenge, the
daily limit) raise :class:`Refused` carrying the HTTP status that says why.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from benchmark.runner.challenge import Challenge, ChallengeEpisode
from leaderboard.db import models
from leaderboard.db.models import TEAM_NAME_MAX, Entry, EpisodeResult, Submission, Team, Token
from leaderboard.db.session import begin_write

DAY = timedelta(days=1)
# The submission.yaml fields kept with a submission, and the ones it must have.
SUBMISSION_FIELDS = (
    "method",
    "description",
    "model",
    "parameters",
    "code_url",
    "paper_url",
    "llm_tokens",
    "wall_time_s",
)


class Refused(ValueError):
    """A request the leaderboard's rules refuse; ``status`` is the HTTP status saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class EpisodeOutcome(Protocol):
    """What a verdict says about one episode (``leaderboard.verify.EpisodeCheck``)."""

    key: str
    ok: bool
    reasons: tuple[str, ...]
    metrics: dict[str, Any]
    trace_hash: str


def utcnow() -> datetime:
    return datetime.now(UTC)


# --- teams and tokens -------------------------------------------------------------------------


def check_team_name(name: str) -> str:
    """``name`` unchanged if it can be a team name: not blank, at most TEAM_NAME_MAX
    characters, no control characters (the pages escape everything else)."""
    if not name.strip():
        raise Refused(422, "team name: must not be empty")
    if len(name) > TEAM_NAME_MAX:
        raise Refused(422, f"team name: {len(name)} characters, at most {TEAM_NAME_MAX}")
    if any(unicodedata.category(c) == "Cc" for c in name):
        raise Refused(422, "team name: must not hold control characters")
    return name


def create_team(session: Session, name: str, now: datetime | None = None) -> Team:
    """A new team; a taken name is refused (409)."""
    begin_write(session)
    team = Team(name=check_team_name(name), created_at=now or utcnow())
    session.add(team)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Refused(409, f"team name {name!r} is taken") from None
    return team


def team_by_name(session: Session, name: str) -> Team | None:
    return session.scalars(select(Team).where(Team.name == name)).one_or_none()


def list_teams(session: Session) -> list[Team]:
    """Every team with its tokens, oldest first."""
    return list(session.scalars(select(Team).options(selectinload(Team.tokens)).order_by(Team.id)))


def add_token(session: Session, team_id: int, sha256: str, now: datetime | None = None) -> Token:
    """Store a token of ``team_id`` by its sha256 (the token itself is never stored)."""
    begin_write(session)
    token = Token(team_id=team_id, sha256=sha256, created_at=now or utcnow())
    session.add(token)
    session.commit()
    return token


def revoke_tokens(session: Session, team_id: int, now: datetime | None = None) -> int:
    """Revoke every active token of ``team_id``; returns how many were active."""
    begin_write(session)
    result = session.execute(
        update(Token)
        .where(Token.team_id == team_id, Token.revoked_at.is_(None))
        .values(revoked_at=now or utcnow())
    )
    session.commit()
    return result.rowcount


def active_token(session: Session, sha256: str) -> Token | None:
    """The unrevoked token with this sha256, with its team."""
    return session.scalars(
        select(Token)
        .options(selectinload(Token.team))
        .where(Token.sha256 == sha256, Token.revoked_at.is_(None))
    ).one_or_none()


# --- challenges -------------------------------------------------------------------------------


def store_challenge(
    session: Session, team_id: int, challenge: Challenge, issued_at: datetime
) -> models.Challenge:
    """Keep an issued challenge (see :mod:`leaderboard.challenges`)."""
    begin_write(session)
    row = models.Challenge(
        id=challenge.id,
        team_id=team_id,
        suite=challenge.suite,
        suite_version=challenge.suite_version,
        issued_at=issued_at,
        expires_at=datetime.fromisoformat(challenge.expires),
        episodes=[
            {"task": e.task, "scene": e.scene, "seed": e.seed, "n_agents": e.n_agents}
            for e in challenge.episodes
        ],
    )
    session.add(row)
    session.commit()
    return row


def as_challenge(row: models.Challenge) -> Challenge:
    """The stored challenge as the benchmark's record (what a run and the verifier read)."""
    return Challenge(
        id=row.id,
        suite=row.suite,
        suite_version=row.suite_version,
        team=row.team.name,
        expires=row.expires_at.isoformat(),
        episodes=tuple(ChallengeEpisode(**e) for e in row.episodes),
    )


def usable_challenge(
    session: Session,
    challenge_id: str,
    team_id: int,
    suite: str,
    suite_version: str,
    now: datetime | None = None,
) -> models.Challenge:
    """The challenge ``challenge_id`` if ``team_id`` may answer it now with a submission on
    ``suite``/``suite_version``: issued (else 422), to this team (403), not answered yet (409),
    not expired (403), for that suite (422)."""
    row = session.get(models.Challenge, challenge_id)
    if row is None:
        raise Refused(422, f"challenge {challenge_id!r} was never issued")
    if row.team_id != team_id:
        raise Refused(403, f"challenge {challenge_id!r} was issued to another team")
    if row.submission is not None:
        raise Refused(
            409,
            f"challenge {challenge_id!r} was already answered by submission "
            f"{row.submission.id}; request a new challenge",
        )
    if row.expires_at <= (now or utcnow()):
        raise Refused(403, f"challenge {challenge_id!r} expired at {row.expires_at.isoformat()}")
    if (row.suite, row.suite_version) != (suite, suite_version):
        raise Refused(
            422,
            f"challenge {challenge_id!r} is for suite {row.suite} {row.suite_version}, "
            f"the submission is for {suite} {suite_version}",
        )
    return row


def challenge_submissions_since(session: Session, team_id: int, since: datetime) -> int:
    """Submissions answering a challenge that ``team_id`` made after ``since``."""
    return session.scalar(
        select(func.count(Submission.id)).where(
            Submission.team_id == team_id,
            Submission.challenge_id.is_not(None),
            Submission.created_at > since,
        )
    )


def challenges_since(session: Session, team_id: int, since: datetime) -> int:
    """Challenges issued to ``team_id`` after ``since``."""
    return session.scalar(
        select(func.count(models.Challenge.id)).where(
            models.Challenge.team_id == team_id, models.Challenge.issued_at > since
        )
    )


def submissions_since(session: Session, team_id: int, since: datetime) -> int:
    """Submissions (any track, any state) that ``team_id`` made after ``since``."""
    return session.scalar(
        select(func.count(Submission.id)).where(
            Submission.team_id == team_id, Submission.created_at > since
        )
    )


# --- submissions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Upload:
    """A stored upload to record: its track, where the bundle is kept, and its
    ``submission.yaml`` (``fields``, keys of SUBMISSION_FIELDS; ``method`` required)."""

    track: str
    suite: str
    suite_version: str
    bundle_path: str
    bundle_sha256: str
    fields: Mapping[str, Any]
    challenge_id: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.fields) - set(SUBMISSION_FIELDS))
        if unknown:
            raise ValueError(f"fields: unknown submission.yaml field(s) {unknown}")
        if not self.fields.get("method"):
            raise ValueError("fields: 'method' is required")


def store_submission(
    session: Session,
    team_id: int,
    upload: Upload,
    daily_limit: int,
    now: datetime | None = None,
) -> Submission:
    """Record an upload as ``queued``. A test submission (one answering a challenge) is
    refused unless :func:`usable_challenge` allows it and the team made fewer than
    ``daily_limit`` test submissions in the last 24 hours (429); checks and insert are one
    transaction, under a lock on the team's row, so concurrent uploads cannot both pass."""
    begin_write(session)
    now = now or utcnow()
    if upload.challenge_id is not None:
        session.execute(select(Team.id).where(Team.id == team_id).with_for_update())
        try:
            usable_challenge(
                session, upload.challenge_id, team_id, upload.suite, upload.suite_version, now
            )
            used = challenge_submissions_since(session, team_id, now - DAY)
            if used >= daily_limit:
                raise Refused(
                    429,
                    f"{used} test submissions in the last 24 hours; the limit is "
                    f"{daily_limit} a day",
                )
        except Refused:
            session.rollback()
            raise
    fields = {name: upload.fields.get(name) for name in SUBMISSION_FIELDS}
    fields["description"] = fields["description"] or ""
    fields["model"] = fields["model"] or ""
    submission = Submission(
        team_id=team_id,
        track=upload.track,
        suite=upload.suite,
        suite_version=upload.suite_version,
        state="queued",
        reason="",
        bundle_path=upload.bundle_path,
        bundle_sha256=upload.bundle_sha256,
        challenge_id=upload.challenge_id,
        created_at=now,
        updated_at=now,
        **fields,
    )
    session.add(submission)
    try:
        session.commit()
    except IntegrityError:
        # Only the challenge can clash: another upload answered it between check and insert.
        session.rollback()
        raise Refused(409, f"challenge {upload.challenge_id!r} was already answered") from None
    return submission


def get_submission(session: Session, submission_id: int) -> Submission | None:
    """A submission with its per-episode results, team and entry."""
    return session.scalars(
        select(Submission)
        .options(
            selectinload(Submission.episodes),
            selectinload(Submission.team),
            selectinload(Submission.entry),
        )
        .where(Submission.id == submission_id)
    ).one_or_none()


def claim_next(session: Session, now: datetime | None = None) -> Submission | None:
    """Move the oldest ``queued`` submission to ``verifying`` and return it (None when the
    queue is empty). Concurrent callers never claim the same one: PostgreSQL skips rows
    another transaction has locked (FOR UPDATE SKIP LOCKED); on SQLite the transaction holds
    the database's write lock from its start (``BEGIN IMMEDIATE``)."""
    begin_write(session)
    submission = session.scalars(
        select(Submission)
        .where(Submission.state == "queued")
        .order_by(Submission.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    ).one_or_none()
    if submission is None:
        session.commit()  # ends the transaction (and its lock) without expiring loaded objects
        return None
    submission.state = "verifying"
    submission.updated_at = now or utcnow()
    session.commit()
    return submission


def requeue_verifying(session: Session, now: datetime | None = None) -> int:
    """Move every ``verifying`` submission back to ``queued`` (at server start: their
    verification died with the previous process); returns how many."""
    begin_write(session)
    result = session.execute(
        update(Submission)
        .where(Submission.state == "verifying")
        .values(state="queued", updated_at=now or utcnow())
    )
    session.commit()
    return result.rowcount


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
    submission, its entry (with ``summary``), unless an entry of the same track has the same
    run-episode traces: then the submission is recorded as a reproduction of that entry's
    submission. Only a ``verifying`` submission takes a verdict."""
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
        digest = traces_digest(trace_hashes)
        original = _entry_with_traces(session, submission.track, digest)
        if original is None:
            try:
                with session.begin_nested():
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
            except IntegrityError:
                # A concurrent verdict entered the same traces first.
                original = _entry_with_traces(session, submission.track, digest)
        if original is not None:
            submission.reproduction_of_id = original.submission_id
    session.commit()
    return submission


def _entry_with_traces(session: Session, track: str, digest: str) -> Entry | None:
    return session.scalars(
        select(Entry).where(Entry.track == track, Entry.traces_digest == digest)
    ).one_or_none()


# --- entries ----------------------------------------------------------------------------------


def track_entries(session: Session, track: str) -> list[Entry]:
    """The entries of one track, with their team and submission, oldest first."""
    return list(
        session.scalars(
            select(Entry)
            .options(selectinload(Entry.team), selectinload(Entry.submission))
            .where(Entry.track == track)
            .order_by(Entry.id)
        )
    )


def tracks(session: Session) -> list[tuple[str, int]]:
    """Every track with entries, and how many, by track key."""
    return [
        (track, count)
        for track, count in session.execute(
            select(Entry.track, func.count(Entry.id)).group_by(Entry.track).order_by(Entry.track)
        )
    ]


def attempts(session: Session, track: str) -> dict[int, int]:
    """Submissions per team on ``track`` (every state: the attempts a team used)."""
    return {
        team_id: count
        for team_id, count in session.execute(
            select(Submission.team_id, func.count(Submission.id))
            .where(Submission.track == track)
            .group_by(Submission.team_id)
        )
    }


def reproductions(session: Session, submission_id: int) -> list[Submission]:
    """The submissions recorded as reproductions of ``submission_id``'s entry."""
    return list(
        session.scalars(
            select(Submission)
            .options(selectinload(Submission.team))
            .where(Submission.reproduction_of_id == submission_id)
            .order_by(Submission.id)
        )
    )
