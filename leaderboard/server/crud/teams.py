"""Teams and their API tokens (stored by sha256, never the token itself)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from leaderboard.core.untrusted import invisible_character
from leaderboard.server.crud.common import Refused, utcnow
from leaderboard.server.db.models import TEAM_NAME_MAX, Team, Token
from leaderboard.server.db.session import begin_write


def check_team_name(name: str) -> str:
    """``name`` unchanged if it can be a team name: not blank, at most TEAM_NAME_MAX
    characters, no control and no Unicode format characters (bidi overrides, zero-width
    spaces: they can make one name render as another); the pages escape everything else."""
    if not name.strip():
        raise Refused(422, "team name: must not be empty")
    if len(name) > TEAM_NAME_MAX:
        raise Refused(422, f"team name: {len(name)} characters, at most {TEAM_NAME_MAX}")
    hidden = invisible_character(name)
    if hidden is not None:
        raise Refused(
            422, f"team name: must not hold control or format characters; it holds {hidden}"
        )
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
