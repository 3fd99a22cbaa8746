"""Engines and sessions for SQLite and PostgreSQL, and the schema upgrade to the newest revision.

SQLite (the default, a file in the data directory) runs in WAL mode with foreign keys on.
Readers never wait. A transaction that writes must be begun as a write transaction
(:func:`begin_write`): on SQLite it starts with ``BEGIN IMMEDIATE``, taking the write lock at
once, so concurrent writers (the server and its worker processes) wait for each other (up to
``SQLITE_BUSY_S``) instead of failing when a read transaction turns into a write.
PostgreSQL is reached through psycopg 3 (``postgresql+psycopg://``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"
SQLITE_BUSY_S = 60.0
# The connection execution option that makes _sqlite_begin take the write lock at once.
WRITE_OPTION = "leaderboard_write"
# The key of PostgreSQL's advisory lock held while the schema is upgraded, so two processes
# starting at once do not both create the tables.
UPGRADE_LOCK = 0x6C62_6462


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url`` (``sqlite:///<file>`` or ``postgresql+psycopg://...``), whose
    pool has room for every request thread (anyio's 40) and the verification dispatcher."""
    kwargs = {"pool_size": 10, "max_overflow": 40, **kwargs}
    if url.startswith("sqlite:"):
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_S}, **kwargs)
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if url.startswith("postgresql+psycopg:"):
        return create_engine(url, pool_pre_ping=True, **kwargs)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:/// or postgresql+psycopg://")


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Transactions are begun by _sqlite_begin, not by the driver (which would begin them
    # DEFERRED and only before the first write).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    write = connection.get_execution_options().get(WRITE_OPTION, False)
    connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def begin_write(session: Session) -> None:
    """Start ``session``'s next transaction as a write transaction (the write lock at once on
    SQLite; nothing special on PostgreSQL). Whatever the session holds open is committed
    first: a write transaction cannot grow out of a read one."""
    if session.in_transaction():
        session.commit()
    session.connection(execution_options={WRITE_OPTION: True})


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose objects stay readable after commit (handed to pages and responses)."""
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(connection: Connection) -> Config:
    """Alembic's configuration for the leaderboard's migrations on ``connection`` (no
    ``alembic.ini``; ``command.revision(alembic_config(c), autogenerate=True)`` writes a new
    revision from the models)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database's schema to ``revision`` (the newest by default), in one
    transaction that holds the database's write lock (SQLite) or an advisory lock
    (PostgreSQL), so concurrent starts upgrade once."""
    with (
        engine.connect() as connection,
        connection.execution_options(**{WRITE_OPTION: True}).begin(),
    ):
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": UPGRADE_LOCK})
        command.upgrade(alembic_config(connection), revision)


def open_database(url: str) -> sessionmaker[Session]:
    """Sessions on the database at ``url``, its schema upgraded to the newest revision."""
    engine = make_engine(url)
    upgrade(engine)
    return make_sessions(engine)
