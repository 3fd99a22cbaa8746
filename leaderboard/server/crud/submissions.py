"""Submissions: an upload recorded as ``queued`` under the limits, read back, and claimed by
the verification worker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from leaderboard.server.crud.challenges import usable_challenge
from leaderboard.server.crud.common import DAY, Refused, lock_team, refuse_past, utcnow
from leaderboard.server.crud.limits import challenge_submissions_since, check_submission_rate
from leaderboard.server.db.models import Submission
from leaderboard.server.db.session import begin_write

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


class AlreadyUploaded(Exception):
    """The team's earlier submission of the same bundle (``submission``) answers an upload."""

    def __init__(self, submission: Submission) -> None:
        super().__init__(f"the same bundle is submission {submission.id}")
        self.submission = submission


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
    hourly_limit: int | None = None,
    now: datetime | None = None,
) -> Submission:
    """Record an upload as ``queued``. It is refused (429) when the team made ``hourly_limit``
    submissions in the last hour (:func:`check_submission_rate`; None: no hourly limit), and a
    test submission (one answering a challenge) unless :func:`usable_challenge` allows it and
    the team made fewer than ``daily_limit`` test submissions in the last 24 hours (429).
    Checks and insert are one transaction, under a lock on the team's row, so concurrent
    uploads never pass a limit. When the team already has a submission of the same bundle
    that is not rejected (:func:`same_upload`: two identical uploads racing), nothing is
    stored and :class:`AlreadyUploaded` carries that submission."""
    begin_write(session)
    now = now or utcnow()
    lock_team(session, team_id)
    existing = same_upload(session, team_id, upload.bundle_sha256)
    if existing is not None:
        session.rollback()
        raise AlreadyUploaded(existing)
    try:
        if hourly_limit is not None:
            check_submission_rate(session, team_id, hourly_limit, now)
        if upload.challenge_id is not None:
            usable_challenge(
                session, upload.challenge_id, team_id, upload.suite, upload.suite_version, now
            )
            used = challenge_submissions_since(session, team_id, now - DAY)
            refuse_past(used, daily_limit, "test submissions", "24 hours", "a day")
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


def same_upload(session: Session, team_id: int, bundle_sha256: str) -> Submission | None:
    """``team_id``'s earliest submission of the bundle whose sha256 is ``bundle_sha256`` that
    was not rejected (queued, verifying or verified), or None: a byte-identical resubmission is
    answered with it and stores nothing."""
    return session.scalars(
        select(Submission)
        .where(
            Submission.team_id == team_id,
            Submission.bundle_sha256 == bundle_sha256,
            Submission.state != "rejected",
        )
        .order_by(Submission.id)
        .limit(1)
    ).one_or_none()


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
