"""Rate limits hold under concurrent requests, on SQLite and on a real PostgreSQL: a team's
requests started together store exactly the limit and the rest are refused with 429 naming it,
both in the database functions (threads racing on one database) and through the real server
(concurrent clients on loopback)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.lb_bundles import archive, members
from helpers.lb_crud import T0, TEST_TRACK, challenge, count, in_threads, submit, upload
from helpers.lb_db import DATABASES, fresh_engine
from helpers.lb_server import Server
from helpers.postgres import PostgresCluster
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.core.bundle import SUBMISSION
from leaderboard.server import crud
from leaderboard.server.db import models
from leaderboard.server.db.models import Submission
from leaderboard.server.db.session import make_sessions, upgrade

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
HEURISTIC = (SEED / "heuristic-smoke-v1.tar.gz").read_bytes()


@pytest.fixture(params=DATABASES)
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    with fresh_engine(request.param, request, tmp_path) as engine:
        upgrade(engine)
        yield make_sessions(engine)


def _split(results: list[Any]) -> tuple[list[Any], list[crud.Refused]]:
    """(stored, refused) of threads' results; anything else fails the test."""
    refused = [r for r in results if isinstance(r, crud.Refused)]
    others = [r for r in results if isinstance(r, Exception) and not isinstance(r, crud.Refused)]
    assert others == []
    return [r for r in results if not isinstance(r, Exception)], refused


# --- the database functions -------------------------------------------------------------------


def test_the_daily_challenge_limit_is_checked_where_the_challenge_is_stored(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        for k in range(2):
            crud.store_challenge(s, team.id, challenge("a", f"ch-{k}"), T0, daily_limit=2)
        with pytest.raises(crud.Refused) as err:
            crud.store_challenge(s, team.id, challenge("a", "ch-2"), T0, daily_limit=2)
        assert err.value.status == 429
        assert str(err.value) == "2 challenges in the last 24 hours; the limit is 2 a day"
        later = T0 + timedelta(hours=24, seconds=1)
        crud.store_challenge(s, team.id, challenge("a", "ch-2"), later, daily_limit=2)
        assert count(s, models.Challenge) == 3


def test_concurrent_challenges_of_one_team_store_exactly_the_limit(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a").id
        other = crud.create_team(s, "b").id

    def draw(i: int) -> str:
        with sessions() as s:
            who = other if i % 4 == 0 else team  # another team's requests are not counted
            row = crud.store_challenge(s, who, challenge("x", f"ch-{i}"), T0, daily_limit=4)
            return row.id

    stored, refused = _split(in_threads(draw, 16))
    assert len(stored) == 8 and len(refused) == 8
    assert {(r.status, str(r)) for r in refused} == {
        (429, "4 challenges in the last 24 hours; the limit is 4 a day")
    }
    with sessions() as s:
        assert crud.challenges_since(s, team, T0 - timedelta(days=1)) == 4
        assert crud.challenges_since(s, other, T0 - timedelta(days=1)) == 4


def test_the_hourly_limit_is_checked_where_the_submission_is_stored(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        for minute in (0, 10):
            submit(s, team.id, now=T0 + timedelta(minutes=minute), hourly_limit=2)
        with pytest.raises(crud.Refused) as err:
            submit(s, team.id, now=T0 + timedelta(minutes=59), hourly_limit=2)
        assert err.value.status == 429
        assert str(err.value) == "2 submissions in the last hour; the limit is 2 an hour"
        submit(s, team.id, now=T0 + timedelta(minutes=61), hourly_limit=2)
        # A test submission is counted by both limits.
        crud.store_challenge(s, team.id, challenge("a"), T0)
        with pytest.raises(crud.Refused, match="limit is 2 an hour"):
            submit(s, team.id, upload(TEST_TRACK, "ch-1"), now=T0 + timedelta(minutes=62),
                   hourly_limit=2)  # fmt: skip
        assert count(s, Submission) == 3


def test_concurrent_uploads_of_one_team_store_exactly_the_hourly_limit(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a").id

    def store(_: int) -> int:
        with sessions() as s:
            return submit(s, team, now=T0, hourly_limit=5)

    stored, refused = _split(in_threads(store, 12))
    assert len(stored) == 5 and len(refused) == 7
    assert {(r.status, str(r)) for r in refused} == {
        (429, "5 submissions in the last hour; the limit is 5 an hour")
    }
    with sessions() as s:
        assert count(s, Submission) == 5


# --- through the real server ------------------------------------------------------------------

CHALLENGES_PER_DAY = 4
SUBMISSIONS_PER_HOUR = 4


@pytest.fixture(scope="module", params=DATABASES)
def board(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres: PostgresCluster,
) -> Iterator[Server]:
    db_url = postgres.create_database("races") if request.param == "postgresql" else ""
    server = Server(
        tmp_path_factory.mktemp("lb") / "data",
        db_url=db_url,
        workers=1,
        challenge_scenes=1,
        challenges_per_day=CHALLENGES_PER_DAY,
        submissions_per_hour=SUBMISSIONS_PER_HOUR,
    ).start()
    try:
        yield server
    finally:
        server.stop()
        if db_url:
            postgres.drop_database(db_url)


def _together(n: int, send: Callable[[httpx.Client, int], httpx.Response]) -> list[httpx.Response]:
    """``send(client, i)`` from ``n`` threads, each with its own connection, started
    together."""
    barrier = threading.Barrier(n)
    out: list[httpx.Response | None] = [None] * n

    def run(i: int) -> None:
        with httpx.Client(timeout=120) as client:
            barrier.wait()
            out[i] = send(client, i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is not None for r in out)
    return out


def _statuses(responses: list[httpx.Response]) -> dict[int, int]:
    counted: dict[int, int] = {}
    for r in responses:
        counted[r.status_code] = counted.get(r.status_code, 0) + 1
    return counted


def _team_id(board: Server, name: str) -> int:
    with board.sessions()() as session:
        return crud.team_by_name(session, name).id


def test_concurrent_challenge_requests_draw_exactly_the_daily_limit(board: Server) -> None:
    token = board.team("eager")

    def draw(client: httpx.Client, _: int) -> httpx.Response:
        return client.post(
            f"{board.url}/api/challenges",
            headers={"Authorization": f"Bearer {token}"},
            json={"suite": "test"},
        )

    responses = _together(4 * CHALLENGES_PER_DAY, draw)
    assert _statuses(responses) == {201: CHALLENGES_PER_DAY, 429: 3 * CHALLENGES_PER_DAY}
    limit = f"the limit is {CHALLENGES_PER_DAY} a day"
    assert all(limit in r.json()["detail"] for r in responses if r.status_code == 429)
    team = _team_id(board, "eager")
    with board.sessions()() as session:
        stored = session.scalar(
            select(func.count(models.Challenge.id)).where(models.Challenge.team_id == team)
        )
    assert stored == CHALLENGES_PER_DAY


def _described(data: bytes, i: int) -> bytes:
    """``data`` with its own description: a distinct upload of the same traces."""
    contents = members(data)
    contents[SUBMISSION] = contents[SUBMISSION].replace(
        b"reference baseline heuristic", f"run {i} of the heuristic".encode()
    )
    return archive(contents)


def test_concurrent_uploads_store_exactly_the_hourly_limit(board: Server) -> None:
    token = board.team("hasty")
    bundles = [_described(HEURISTIC, i) for i in range(3 * SUBMISSIONS_PER_HOUR)]

    def send(client: httpx.Client, i: int) -> httpx.Response:
        return client.post(
            f"{board.url}/api/submissions",
            headers={"Authorization": f"Bearer {token}"},
            files={"file": ("sub.tar.gz", bundles[i], "application/gzip")},
        )

    responses = _together(len(bundles), send)
    assert _statuses(responses) == {202: SUBMISSIONS_PER_HOUR, 429: 2 * SUBMISSIONS_PER_HOUR}
    limit = f"the limit is {SUBMISSIONS_PER_HOUR} an hour"
    assert all(limit in r.json()["detail"] for r in responses if r.status_code == 429)
    team = _team_id(board, "hasty")
    with board.sessions()() as session:
        stored = session.scalar(select(func.count(Submission.id)).where(Submission.team_id == team))
    assert stored == SUBMISSIONS_PER_HOUR
