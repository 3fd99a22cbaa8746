"""Team tokens: random, shown once, stored as sha256 only, sent as ``Authorization: Bearer``.

A token is ``lb_`` and 43 URL-safe characters (32 random bytes). The server looks a token up by
its sha256 and compares the digests with :func:`hmac.compare_digest`, so neither the token nor
its hash is ever compared in a way whose time depends on where they differ.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import Depends, HTTPException, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from leaderboard.server import crud
from leaderboard.server.api.deps import get_session

TOKEN_PREFIX = "lb_"
TOKEN_BYTES = 32


@dataclass(frozen=True)
class TeamIdentity:
    """The team a request was authenticated as."""

    id: int
    name: str


def new_token() -> str:
    """A fresh random token."""
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def token_sha256(token: str) -> str:
    """The hex sha256 of a token: the only form in which it is stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(session: Session, team_id: int, now: datetime | None = None) -> str:
    """Give ``team_id`` a new token; returns it (it is not kept anywhere)."""
    token = new_token()
    crud.add_token(session, team_id, token_sha256(token), now)
    return token


def authenticate(session: Session, token: str) -> TeamIdentity | None:
    """The team whose active (unrevoked) token ``token`` is, or None."""
    digest = token_sha256(token)
    row = crud.active_token(session, digest)
    if row is None or not hmac.compare_digest(row.sha256, digest):
        return None
    return TeamIdentity(row.team.id, row.team.name)


bearer = HTTPBearer(auto_error=False, description="a team token: Authorization: Bearer <token>")


def current_team(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    session: Annotated[Session, Depends(get_session)],
) -> TeamIdentity:
    """FastAPI dependency: the team of the request's bearer token; 401 when the token is
    missing, unknown or revoked."""
    team = authenticate(session, credentials.credentials) if credentials else None
    if team is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            detail="a valid team token is required: Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return team
