"""The whole leaderboard through the real server (uvicorn in a subprocess) on SQLite and on a
real PostgreSQL 15: upload, verification by replay in the worker pool, ranking, reproductions,
forged results rejected by field, a server killed mid-verification, and the test track's
challenges."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from leaderboard.client.pack import pack_run
from leaderboard.core.bundle import read_bundle
from leaderboard.server.db.models import Entry, Submission
from leaderboard.tools.attacks import with_submission
from tests.helpers.lb_bundles import edit, reseal, run_suite
from tests.helpers.lb_server import Server
from tests.helpers.postgres import PostgresCluster

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
ORACLE = (SEED / "oracle-smoke-v1.tar.gz").read_bytes()
HEURISTIC = (SEED / "heuristic-smoke-v1.tar.gz").read_bytes()
TRANSPORT = "oracle/transport_produce_fridge_v0/test/n2/s0/comm1/run"


@pytest.fixture(params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path: Path, postgres: PostgresCluster
) -> Iterator[Server]:
    db_url = ""
    if request.param == "postgresql":
        db_url = postgres.create_database(f"board_{request.node.name[-40:]}".replace("-", "_"))
    with Server(tmp_path / "data", db_url=db_url, workers=2) as board:
        yield board


def _row(rows: list[dict], key: str) -> dict:
    return next(r for r in rows if r["key"] == key)


def test_a_submission_is_verified_ranked_and_a_copy_recorded_as_its_reproduction(
    server: Server,
) -> None:
    first, second = server.team("first"), server.team("<script>second</script>")
    accepted = server.upload(first, ORACLE)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["state"] == "queued"
    state = server.wait(accepted.json()["id"])
    assert state["state"] == "verified", state
    assert state["rank"] == 1 and state["entry"] is not None and state["reproduces"] is None
    assert len(state["episodes"]) == 12 and all(e["ok"] for e in state["episodes"])
    rows = {r["key"]: r for r in read_bundle(io.BytesIO(ORACLE)).rows}
    # A genuine bundle: every recomputed metric is the submitted one.
    for episode in state["episodes"]:
        row = rows[episode["key"]]
        assert episode["metrics"] == {k: row[k] for k in episode["metrics"]}

    copy = server.wait(server.upload(second, ORACLE).json()["id"])
    assert copy["state"] == "verified" and copy["reproduces"] == state["entry"]
    assert copy["entry"] is None and copy["team"] == "<script>second</script>"
    with server.sessions()() as session:
        assert session.scalar(select(func.count(Entry.id))) == 1


def test_forged_results_are_rejected_naming_the_episode_and_field(server: Server) -> None:
    token = server.team("forger")

    def metric(rows: list[dict], traces: dict) -> None:
        _row(rows, TRANSPORT)["L"] -= 3

    def action(rows: list[dict], traces: dict) -> None:
        trace = traces[TRANSPORT]
        trace["decisions"][1]["actions"]["agent_0"] = "wait"
        reseal(trace, _row(rows, TRANSPORT))

    for change, fragment in ((metric, f"{TRANSPORT}: L: "), (action, "replayed")):
        submitted = server.upload(token, edit(ORACLE, change))
        assert submitted.status_code == 202, submitted.text
        state = server.wait(submitted.json()["id"])
        assert state["state"] == "rejected" and state["entry"] is None
        bad = [e for e in state["episodes"] if not e["ok"]]
        assert [e["key"] for e in bad] == [TRANSPORT], bad
        assert fragment in f"{TRANSPORT}: {bad[0]['reasons'][0]}", bad
        assert TRANSPORT in state["reason"]
    # A rejected bundle is not kept.
    assert list((server.data_dir / "bundles").iterdir()) == []


def test_a_server_killed_mid_verification_requeues_and_shows_nothing_half_written(
    tmp_path: Path,
) -> None:
    board = Server(tmp_path / "data", workers=1).start()
    try:
        token = board.team("patient")
        submission = board.upload(token, HEURISTIC).json()["id"]
        seen = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen = httpx.get(f"{board.url}/api/submissions/{submission}").json()
            if seen["state"] != "queued":
                break
            time.sleep(0.01)
        assert seen is not None and seen["state"] == "verifying", seen
        board.kill()
        with board.sessions()() as session:
            row = session.get(Submission, submission)
            assert row.state == "verifying" and row.episodes == [] and row.entry is None
        board.start()
        final = board.wait(submission)
        assert final["state"] == "verified" and len(final["episodes"]) == 12
        with board.sessions()() as session:
            assert session.scalar(select(func.count(Entry.id))) == 1
    finally:
        board.stop()


@pytest.fixture(scope="module")
def challenge_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    board = Server(
        tmp_path_factory.mktemp("lb") / "data",
        workers=2,
        challenge_scenes=1,
        test_submissions_per_day=2,
    ).start()
    try:
        yield board
    finally:
        board.stop()


def _challenge(board: Server, token: str, out: Path) -> Path:
    issued = httpx.post(
        f"{board.url}/api/challenges",
        headers={"Authorization": f"Bearer {token}"},
        json={"suite": "test"},
        timeout=120,
    )
    assert issued.status_code == 201, issued.text
    out.write_text(json.dumps(issued.json()))
    return out


def _answer(challenge: Path, work: Path) -> bytes:
    run = run_suite(work, "suite=test", f"challenge={challenge}", "baseline=oracle")["root"]
    return pack_run(run, work / "sub.tar.gz", {"method": "Oracle"}).read_bytes()


def test_a_challenge_is_answered_once_within_the_daily_limit(
    challenge_board: Server, tmp_path: Path
) -> None:
    token = challenge_board.team("challenger")
    first = _challenge(challenge_board, token, tmp_path / "c1.json")
    other = _challenge(challenge_board, token, tmp_path / "c2.json")
    third = _challenge(challenge_board, token, tmp_path / "c3.json")
    one, two = json.loads(first.read_text()), json.loads(other.read_text())
    # The same task x scene cells for every challenge, the seeds drawn anew.
    assert [(e["task"], e["scene"]) for e in one["episodes"]] == [
        (e["task"], e["scene"]) for e in two["episodes"]
    ]
    assert [e["seed"] for e in one["episodes"]] != [e["seed"] for e in two["episodes"]]

    bundle = _answer(first, tmp_path / "run1")
    accepted = challenge_board.upload(token, bundle)
    assert accepted.status_code == 202, accepted.text
    state = challenge_board.wait(accepted.json()["id"])
    assert state["state"] == "verified" and state["challenge"] == one["id"], state

    # The same bundle again is the same submission (200); another answer to the same
    # challenge is refused, since a challenge is answered once.
    again = challenge_board.upload(token, bundle)
    assert again.status_code == 200 and again.json()["id"] == state["id"], again.text
    reused = challenge_board.upload(
        token, with_submission(bundle, "method: again\nllm_tokens: 0\nwall_time_s: 1.0\n")
    )
    assert reused.status_code == 409 and "already answered" in reused.json()["detail"]

    assert challenge_board.upload(token, _answer(other, tmp_path / "run2")).status_code == 202
    over = challenge_board.upload(token, _answer(third, tmp_path / "run3"))
    assert over.status_code == 429 and "limit is 2 a day" in over.json()["detail"]


def test_an_expired_challenge_is_refused(tmp_path: Path) -> None:
    board = Server(tmp_path / "data", workers=1, challenge_scenes=1, challenge_lifetime_h=0.001)
    board.start()
    try:
        token = board.team("late")
        challenge = _challenge(board, token, tmp_path / "c.json")
        bundle = _answer(challenge, tmp_path / "run")
        expires = json.loads(challenge.read_text())["expires"]
        time.sleep(4.0)  # the challenge lives 0.001 h = 3.6 s
        response = board.upload(token, bundle)
        assert response.status_code == 403, response.text
        assert f"expired at {expires}" in response.json()["detail"]
        with board.sessions()() as session:
            assert session.scalar(select(func.count(Submission.id))) == 0
    finally:
        board.stop()


def test_uploads_past_the_hourly_rate_are_refused_with_429(tmp_path: Path) -> None:
    board = Server(tmp_path / "data", workers=1, submissions_per_hour=1).start()
    try:
        token = board.team("hasty")
        assert board.upload(token, ORACLE).status_code == 202
        again = board.upload(token, HEURISTIC)
        assert again.status_code == 429
        assert "limit is 1 an hour" in again.json()["detail"]
        with board.sessions()() as session:
            assert session.scalar(select(func.count(Submission.id))) == 1
    finally:
        board.stop()
