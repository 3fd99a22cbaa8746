"""The FastAPI dependencies the routes and pages share: a database session per request."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import Request
from sqlalchemy.orm import Session


def get_session(request: Request) -> Iterator[Session]:
    """FastAPI dependency: a session of the app's sessionmaker (``app.state.sessions``),
    closed after the request."""
    with request.app.state.sessions() as session:
        yield session
