"""The leaderboard's databases for tests: each test gets a fresh SQLite file or a fresh
database on the session's PostgreSQL cluster (the ``postgres`` fixture)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine

from leaderboard.server.db.session import make_engine

DATABASES = ("sqlite", "postgresql")


def database_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty database of ``kind`` (one of DATABASES), dropped after the test."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'leaderboard.sqlite3'}"
    if kind == "postgresql":
        cluster = request.getfixturevalue("postgres")
        url = cluster.create_database("lb")
        request.addfinalizer(lambda: cluster.drop_database(url))
        return url
    raise ValueError(f"unknown database kind {kind!r}; kinds are {DATABASES}")


@contextmanager
def fresh_engine(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on a new database of ``kind``, disposed afterwards (its connections closed)."""
    engine = make_engine(database_url(kind, request, tmp_path))
    try:
        yield engine
    finally:
        engine.dispose()
