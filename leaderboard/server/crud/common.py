"""What every part of the leaderboard's database functions shares: the refusal a client can
cause, the clock, and the lock on a team's row that makes a limit hold under concurrent
requests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from leaderboard.server.db.models import Team

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


class Refused(ValueError):
    """A request the leaderboard's rules refuse; ``status`` is the HTTP status saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def utcnow() -> datetime:
    return datetime.now(UTC)


def lock_team(session: Session, team_id: int) -> None:
    """Hold ``team_id``'s row until the transaction ends (PostgreSQL; SQLite's write
    transaction already excludes every other writer)."""
    session.execute(select(Team.id).where(Team.id == team_id).with_for_update())


def refuse_past(made: int, limit: int, what: str, window: str, per: str) -> None:
    if made >= limit:
        raise Refused(429, f"{made} {what} in the last {window}; the limit is {limit} {per}")
