"""The leaderboard's database on SQLite and on a real PostgreSQL: the migrations build exactly
the models' schema (each revision over the data of the one before), upgrades are idempotent and
safe to run concurrently, and the engines enforce what the models declare."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import helpers.postgres as postgres_helper
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from helpers.lb_db import DATABASES, database_url, fresh_engine
from sqlalchemy import Column, Engine, MetaData, String, inspect, select, text
from sqlalchemy.exc import IntegrityError, StatementError

from leaderboard.server.db.models import NAMING, Base, EpisodeResult, Submission, Team, Token
from leaderboard.server.db.session import (
    MIGRATIONS_DIR,
    alembic_config,
    make_engine,
    make_sessions,
    upgrade,
)


@pytest.fixture(params=DATABASES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with fresh_engine(request.param, request, tmp_path) as engine:
        yield engine


def _differences(engine: Engine, metadata: MetaData = Base.metadata) -> list:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return compare_metadata(context, metadata)


def _head() -> str:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config).get_current_head()


def test_the_migrated_schema_equals_the_models(engine: Engine) -> None:
    upgrade(engine)
    assert _differences(engine) == []
    assert set(inspect(engine).get_table_names()) == {*Base.metadata.tables, "alembic_version"}


def test_the_schema_comparison_notices_a_column_the_migrations_lack(engine: Engine) -> None:
    upgrade(engine)
    models = MetaData(naming_convention=NAMING)
    for table in Base.metadata.tables.values():
        table.to_metadata(models)
    models.tables["teams"].append_column(Column("motto", String(40), nullable=True))
    differences = _differences(engine, models)
    assert [(d[0], d[2], d[3].name) for d in differences] == [("add_column", "teams", "motto")]


def test_upgrading_twice_changes_nothing_and_records_the_head(engine: Engine) -> None:
    upgrade(engine)
    upgrade(engine)
    with engine.connect() as conn:
        versions = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    assert versions == [_head()]
    assert _differences(engine) == []


def test_downgrading_to_base_removes_every_table(engine: Engine) -> None:
    upgrade(engine)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "base")
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}


# A process that imports everything, waits for the go file, then upgrades the database.
UPGRADER = """
import sys, time
from pathlib import Path
from leaderboard.server.db.session import make_engine, upgrade
engine = make_engine(sys.argv[1])
while not Path(sys.argv[2]).exists():
    time.sleep(0.005)
upgrade(engine)
"""


@pytest.mark.parametrize("kind", DATABASES)
def test_processes_upgrading_at_once_build_the_schema_once(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = database_url(kind, request, tmp_path)
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", UPGRADER, url, str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    go.touch()
    outcomes = [(p.wait(timeout=120), p.communicate()[1]) for p in procs]
    assert outcomes == [(0, "")] * len(procs)
    engine = make_engine(url)
    try:
        assert _differences(engine) == []
    finally:
        engine.dispose()


def test_sqlite_runs_in_wal_mode_with_foreign_keys_on(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'lb.sqlite3'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    engine.dispose()


def test_a_token_of_a_team_that_does_not_exist_is_refused(engine: Engine) -> None:
    upgrade(engine)
    with make_sessions(engine)() as session:
        session.add(Token(team_id=12345, sha256="0" * 64, created_at=datetime.now(UTC)))
        with pytest.raises(IntegrityError):
            session.commit()


def test_an_unknown_submission_state_is_refused_by_the_database(engine: Engine) -> None:
    upgrade(engine)
    now = datetime.now(UTC)
    with make_sessions(engine)() as session:
        session.add(Team(name="a", created_at=now))
        session.commit()
    insert = text(
        "INSERT INTO submissions (team_id, track, suite, suite_version, state, reason, "
        "bundle_path, bundle_sha256, method, description, model, created_at, updated_at) "
        "VALUES (1, 't', 's', 'v1', :state, '', 'p', 'h', 'm', '', '', :now, :now)"
    )
    with engine.begin() as conn:
        conn.execute(insert, {"state": "queued", "now": now.replace(tzinfo=None)})
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert, {"state": "lost", "now": now.replace(tzinfo=None)})


def test_timestamps_come_back_as_the_same_instant_in_utc(engine: Engine) -> None:
    upgrade(engine)
    stamp = datetime(2030, 5, 1, 14, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    sessions = make_sessions(engine)
    with sessions() as session:
        session.add(Team(name="a", created_at=stamp))
        session.commit()
    with sessions() as session:
        read = session.scalars(select(Team.created_at)).one()
    assert read == stamp and read.utcoffset() == timedelta(0)
    assert (read.hour, read.microsecond) == (12, 123456)
    with sessions() as session:
        session.add(Team(name="b", created_at=datetime(2030, 5, 1)))
        with pytest.raises(StatementError, match="naive datetime"):
            session.commit()


def test_a_machine_without_postgresql_gets_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_helper.shutil, "which", lambda _: None)
    monkeypatch.setattr(postgres_helper.glob, "glob", lambda _: [])
    with pytest.raises(FileNotFoundError, match="install PostgreSQL 15"):
        postgres_helper.find_pg_bin()


def _indexes(engine: Engine, table: str) -> dict[str, list[str]]:
    return {i["name"]: i["column_names"] for i in inspect(engine).get_indexes(table)}


def test_trace_hashes_are_indexed_by_revision_0002_over_existing_rows(engine: Engine) -> None:
    upgrade(engine, "0001")
    assert "ix_episode_results_trace_hash" not in _indexes(engine, "episode_results")
    now = datetime.now(UTC)
    sessions = make_sessions(engine)
    with sessions() as session:
        team = Team(name="a", created_at=now)
        session.add(team)
        session.flush()
        submission = Submission(
            team_id=team.id, track="t", suite="s", suite_version="v1", state="verified",
            reason="", bundle_path="p", bundle_sha256="h", method="m", description="",
            model="", created_at=now, updated_at=now,
        )  # fmt: skip
        session.add(submission)
        session.flush()
        session.add(
            EpisodeResult(submission_id=submission.id, key="k", ok=True, reasons=[],
                          metrics={}, trace_hash="ab" * 32)
        )  # fmt: skip
        session.commit()
    upgrade(engine)
    assert _indexes(engine, "episode_results")["ix_episode_results_trace_hash"] == ["trace_hash"]
    assert _differences(engine) == []
    with sessions() as session:
        found = session.scalars(
            select(EpisodeResult.key).where(EpisodeResult.trace_hash == "ab" * 32)
        ).all()
    assert found == ["k"]
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0001")
    assert "ix_episode_results_trace_hash" not in _indexes(engine, "episode_results")
