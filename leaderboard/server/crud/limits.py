"""The rate limits: challenges a team drew in a day, submissions it made in an hour, and
test submissions (answers to challenges) it made in a day."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from leaderboard.server.crud.common import DAY, HOUR, refuse_past, utcnow
from leaderboard.server.db import models
from leaderboard.server.db.models import Submission


def check_challenge_rate(
    session: Session, team_id: int, limit: int, now: datetime | None = None
) -> None:
    """Refuse (429) a challenge to ``team_id`` when it drew ``limit`` in the 24 hours before
    ``now``."""
    made = challenges_since(session, team_id, (now or utcnow()) - DAY)
    refuse_past(made, limit, "challenges", "24 hours", "a day")


def check_submission_rate(
    session: Session, team_id: int, limit: int, now: datetime | None = None
) -> None:
    """Refuse (429) an upload of ``team_id`` when it made ``limit`` submissions (any track,
    any state) in the hour before ``now``."""
    made = submissions_since(session, team_id, (now or utcnow()) - HOUR)
    refuse_past(made, limit, "submissions", "hour", "an hour")


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
