"""The verification worker with real parts: a real database (SQLite, and PostgreSQL where
said), the committed reference bundle of the oracle (and forgeries made from its bytes), and
real worker processes. A good bundle ends verified with an entry, a forged one rejected naming
the episode and the field; episodes past their time or memory limit, and workers that die or
hang, are rejections naming the limits, and the next submission still verifies; a bug of the
server is an internal error; stopping leaves the submission being verified to be requeued."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import lb_checks
from helpers.lb_db import DATABASES, database_url
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from benchmark.metrics.episode import episode_metrics
from benchmark.results.challenge import load_challenge
from leaderboard.client.pack import pack_run
from leaderboard.core.bundle import read_bundle
from leaderboard.core.episode_pool import EpisodePool
from leaderboard.core.ranking import entry_summary
from leaderboard.core.verify import verify_episode
from leaderboard.server import crud
from leaderboard.server.db.models import Entry, Submission
from leaderboard.server.db.session import open_database
from leaderboard.server.services.verification import verify_next, verify_submission
from leaderboard.server.settings import Settings
from leaderboard.server.worker import VerificationPool
from tests.helpers.lb_bundles import copy_of, edit, run_suite, write_challenge

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
ORACLE = (SEED / "oracle-smoke-v1.tar.gz").read_bytes()
HEURISTIC = (SEED / "heuristic-smoke-v1.tar.gz").read_bytes()
RANDOM = (SEED / "random-smoke-v1.tar.gz").read_bytes()
TRANSPORT = "oracle/transport_produce_fridge_v0/test/n2/s0/comm1/run"
WAIT_S = 300.0  # a bound on waiting for the background thread, never a measured time


def _row(rows: list[dict], key: str) -> dict:
    return next(r for r in rows if r["key"] == key)


def _metric_changed(rows: list[dict], traces: dict) -> None:
    _row(rows, TRANSPORT)["L"] -= 3


def _action_edited(rows: list[dict], traces: dict) -> None:
    traces[TRANSPORT]["decisions"][1]["actions"]["agent_0"] = "wait"


class Board:
    """A data directory and a database, as the server has them."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        self.tmp_path = tmp_path
        self.url = url
        self.sessions: sessionmaker[Session] = open_database(url)
        self.pools: list[EpisodePool] = []

    def settings(self, **options: Any) -> Settings:
        options = {"workers": 2, **options}
        return Settings(data_dir=self.tmp_path, db_url=self.url, secret=b"s" * 32, **options)

    def pool(self, settings: Settings, **options: Any) -> EpisodePool:
        pool = EpisodePool(
            settings.workers, settings.episode_time_s, settings.episode_memory_mb, **options
        )
        self.pools.append(pool)
        return pool

    def submit(self, data: bytes, team: str = "team-a", challenge_id: str | None = None) -> int:
        """Store ``data`` as the upload route does and queue it; returns the submission id."""
        bundle = read_bundle(io.BytesIO(data))
        relative = f"bundles/{bundle.sha256}.tar.gz"
        (self.tmp_path / "bundles").mkdir(exist_ok=True)
        (self.tmp_path / relative).write_bytes(data)
        fields = {k: v for k, v in bundle.submission.items() if k in crud.SUBMISSION_FIELDS}
        with self.sessions() as session:
            row = crud.team_by_name(session, team) or crud.create_team(session, team)
            upload = crud.Upload(
                track=bundle.track.key,
                suite=bundle.track.suite,
                suite_version=bundle.track.suite_version,
                bundle_path=relative,
                bundle_sha256=bundle.sha256,
                fields=fields,
                challenge_id=challenge_id,
            )
            return crud.store_submission(session, row.id, upload, daily_limit=3).id

    def get(self, submission_id: int) -> Submission:
        with self.sessions() as session:
            return crud.get_submission(session, submission_id)

    def entries(self) -> int:
        with self.sessions() as session:
            return session.scalar(select(func.count(Entry.id)))

    def bundle_file(self, submission_id: int) -> Path:
        return self.tmp_path / self.get(submission_id).bundle_path

    def verify_all(self, settings: Settings, mapper: Callable = map, check=verify_episode) -> None:
        while verify_next(settings, self.sessions, mapper, check) is not None:
            pass

    def wait(self, submission_id: int, states: tuple[str, ...]) -> Submission:
        deadline = time.monotonic() + WAIT_S
        while (submission := self.get(submission_id)).state not in states:
            assert time.monotonic() < deadline, f"submission {submission_id}: {submission.state}"
            time.sleep(0.1)
        return submission

    def close(self) -> None:
        for pool in self.pools:
            pool.close()
        self.sessions.kw["bind"].dispose()


def _board(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> Iterator[Board]:
    board = Board(tmp_path, database_url(kind, request, tmp_path))
    try:
        yield board
    finally:
        board.close()


@pytest.fixture
def board(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Board]:
    yield from _board(request, tmp_path, "sqlite")


@pytest.fixture(params=DATABASES)
def any_board(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Board]:
    yield from _board(request, tmp_path, request.param)


@pytest.fixture
def flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory of lb_checks' marks, seen by the worker processes started after this."""
    path = tmp_path / "flags"
    path.mkdir()
    monkeypatch.setenv(lb_checks.FLAGS, str(path))
    return path


def _episode_reasons(submission: Submission) -> dict[str, list[str]]:
    return {e.key: e.reasons for e in submission.episodes if not e.ok}


def _assert_verified(board: Board, submission_id: int) -> Submission:
    submission = board.get(submission_id)
    assert (submission.state, submission.reason) == ("verified", ""), submission.reason
    assert len(submission.episodes) == 12 and all(e.ok for e in submission.episodes)
    return submission


def test_a_good_bundle_is_verified_with_the_servers_metrics_and_summary(any_board: Board) -> None:
    settings = any_board.settings()
    sid = any_board.submit(ORACLE)
    any_board.verify_all(settings, any_board.pool(settings).map)
    submission = _assert_verified(any_board, sid)
    bundle = read_bundle(io.BytesIO(ORACLE))
    for result in submission.episodes:
        assert result.metrics == episode_metrics(bundle.traces[result.key])
        assert result.trace_hash == bundle.traces[result.key]["trace_hash"]
    # The honest rows carry the recomputed metrics, so the summary is theirs.
    summary = submission.entry.summary
    assert summary == json.loads(json.dumps(entry_summary(bundle.rows, bundle.traces)))
    overall = summary["families"]["all"]
    assert summary["episodes"] == 6 and overall["SR"]["n"] == 6
    assert overall["SR"]["successes"] == sum(r["SR"] for r in bundle.rows if not r["reference"])
    assert submission.reproduction_of_id is None and any_board.bundle_file(sid).exists()


def test_the_summary_takes_no_unchecked_field_of_a_row(board: Board) -> None:
    # Fields a row may carry but the server cannot check: the run's bookkeeping and a team's
    # own statistics. (A wrong family, or a reference metric such as speedup in a row, is
    # refused with the bundle: tests/test_lb_verify.py, tests/test_lb_bundle.py.)
    def change(rows: list[dict], traces: dict) -> None:
        row = _row(rows, TRANSPORT)
        row.update({"wall_s": 1e6, "attempts": 9, "llm/tokens_in": 1e9, "plan/coverage": 1.0})

    settings = board.settings()
    sid = board.submit(edit(ORACLE, change))
    board.verify_all(settings, board.pool(settings).map)
    families = _assert_verified(board, sid).entry.summary["families"]
    honest = read_bundle(io.BytesIO(ORACLE))
    assert families == json.loads(json.dumps(entry_summary(honest.rows, honest.traces)))["families"]
    assert "llm/tokens_in" not in families["transport"]


def test_a_copy_that_raced_past_the_upload_check_is_rejected_and_its_bundle_released(
    board: Board,
) -> None:
    # Both are queued before either is verified, so the upload's check saw no entry to copy.
    settings = board.settings()
    original = board.submit(HEURISTIC, team="first")
    copy = board.submit(copy_of(RANDOM, HEURISTIC, 5), team="copier")
    path = board.bundle_file(copy)
    for submission, state in ((original, "verified"), (copy, "rejected")):
        with board.sessions() as session:
            assert crud.claim_next(session).id == submission
        assert verify_submission(settings, board.sessions, submission) == state
    rejected = board.get(copy)
    assert rejected.state == "rejected" and rejected.entry is None
    entry = board.get(original).entry.id
    assert f"5 of its 6 run episodes are traces of entry {entry} by team 'first'" in (
        rejected.reason
    )
    assert not path.exists()
    assert board.entries() == 1


def test_the_same_traces_again_are_a_reproduction_not_a_second_entry(board: Board) -> None:
    settings = board.settings()
    first, second = board.submit(ORACLE), board.submit(ORACLE, team="team-b")
    board.verify_all(settings, board.pool(settings).map)
    _assert_verified(board, first)
    again = _assert_verified(board, second)
    assert again.reproduction_of_id == first and again.entry is None
    assert board.entries() == 1


@pytest.mark.parametrize(
    ("forgery", "reason"),
    [
        (_metric_changed, f"{TRANSPORT}: L: 22 != 25"),
        (_action_edited, f"{TRANSPORT}: trace_hash: "),
    ],
    ids=["metric-changed", "action-edited"],
)
def test_a_forged_bundle_is_rejected_naming_the_episode_and_field_and_its_file_deleted(
    board: Board, forgery: Callable, reason: str
) -> None:
    settings = board.settings()
    sid = board.submit(edit(ORACLE, forgery))
    path = board.bundle_file(sid)
    board.verify_all(settings, board.pool(settings).map)
    submission = board.get(sid)
    assert submission.state == "rejected"
    assert submission.reason.startswith(f"1 of 12 episodes failed verification: {reason}")
    assert list(_episode_reasons(submission)) == [TRANSPORT]
    assert _episode_reasons(submission)[TRANSPORT][0].startswith(reason.split(": ", 1)[1])
    assert board.entries() == 0 and not path.exists()


def test_a_rejected_bundle_file_stays_while_a_submission_not_rejected_uses_it(
    board: Board,
) -> None:
    settings = board.settings()
    forged = edit(ORACLE, _metric_changed)
    first, second = board.submit(forged), board.submit(forged, team="team-b")
    path = board.bundle_file(first)
    with board.sessions() as session:
        crud.claim_next(session)
    assert verify_submission(settings, board.sessions, first) == "rejected"
    assert path.exists() and board.get(second).state == "queued"
    board.verify_all(settings)
    assert board.get(second).state == "rejected" and not path.exists()


def test_a_bundle_level_failure_is_the_reason(board: Board) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        rows.remove(_row(rows, TRANSPORT))

    settings = board.settings()
    sid = board.submit(edit(ORACLE, change))
    board.verify_all(settings)
    submission = board.get(sid)
    assert (submission.state, submission.reason) == ("rejected", f"missing episode {TRANSPORT}")
    assert submission.episodes == []


def test_episodes_over_their_time_limit_are_rejected_naming_it(board: Board) -> None:
    settings = board.settings(episode_time_s=0.001)
    sid = board.submit(ORACLE)
    board.verify_all(settings, board.pool(settings).map)
    submission = board.get(sid)
    limit = "time: the replay passed the limit of 0.001 s (episode_time_s)"
    assert submission.state == "rejected"
    assert submission.reason.startswith(f"12 of 12 episodes failed verification: {TRANSPORT}: ")
    assert submission.reason.endswith(limit)
    assert {tuple(r) for r in _episode_reasons(submission).values()} == {(limit,)}


def test_after_an_episode_times_out_the_pool_verifies_the_next_submission(
    board: Board, flags: Path
) -> None:
    settings = board.settings(episode_time_s=8.0)
    first, second = board.submit(ORACLE), board.submit(ORACLE, team="team-b")
    board.verify_all(settings, board.pool(settings).map, lb_checks.sleeps_once)
    key, _ = lb_checks.read_flag("sleeps")
    assert _episode_reasons(board.get(first)) == {
        key: ["time: the replay passed the limit of 8 s (episode_time_s)"]
    }
    assert board.get(first).state == "rejected"
    _assert_verified(board, second)


def test_a_hung_worker_is_killed_by_the_backstop_and_replaced(board: Board, flags: Path) -> None:
    # A limit the honest replays keep even on a loaded machine; the hung one never returns.
    settings = board.settings(episode_time_s=5.0)
    pool = board.pool(settings, backstop=8.0)
    first, second = board.submit(ORACLE), board.submit(ORACLE, team="team-b")
    board.verify_all(settings, pool.map, lb_checks.hangs_once)
    key, pid = lb_checks.read_flag("hangs")
    assert _episode_reasons(board.get(first)) == {
        key: [
            "time: no result within 8 s, past the limit of 5 s (episode_time_s); "
            "its worker process was stopped"
        ]
    }
    assert pid not in pool.pids and not Path(f"/proc/{pid}").exists()
    _assert_verified(board, second)


def test_a_worker_that_dies_rejects_its_episode_and_the_next_submission_verifies(
    board: Board, flags: Path
) -> None:
    settings = board.settings()
    pool = board.pool(settings)
    first, second = board.submit(ORACLE), board.submit(ORACLE, team="team-b")
    board.verify_all(settings, pool.map, lb_checks.dies_once)
    key, pid = lb_checks.read_flag("dies")
    rejected = board.get(first)
    assert rejected.state == "rejected" and rejected.reason.startswith("1 of 12 episodes failed")
    assert _episode_reasons(rejected) == {
        key: [
            "worker: the process replaying it died (exit code 3) under the limits of 60 s "
            "(episode_time_s) and 2048 MiB (episode_memory_mb)"
        ]
    }
    assert pid not in pool.pids
    _assert_verified(board, second)
    # The second submission shares the bundle file and is not rejected: the file stays.
    assert board.bundle_file(first).exists()


def test_an_episode_out_of_memory_is_rejected_naming_the_limit(board: Board, flags: Path) -> None:
    settings = board.settings(episode_memory_mb=1024)
    first, second = board.submit(ORACLE), board.submit(ORACLE, team="team-b")
    board.verify_all(settings, board.pool(settings).map, lb_checks.exhausts_memory_once)
    key, _ = lb_checks.read_flag("memory")
    assert _episode_reasons(board.get(first)) == {
        key: ["memory: the replay passed the limit of 1024 MiB (episode_memory_mb)"]
    }
    _assert_verified(board, second)


def test_a_memory_limit_too_small_for_a_replay_rejects_every_episode(board: Board) -> None:
    settings = board.settings(workers=1, episode_memory_mb=1)
    sid = board.submit(ORACLE)
    board.verify_all(settings, board.pool(settings).map)
    reasons = _episode_reasons(board.get(sid))
    assert len(reasons) == 12
    assert all(len(r) == 1 and "1 MiB (episode_memory_mb)" in r[0] for r in reasons.values())


def test_a_missing_bundle_file_is_an_internal_error(board: Board) -> None:
    settings = board.settings()
    sid = board.submit(ORACLE)
    board.bundle_file(sid).unlink()
    board.verify_all(settings)
    submission = board.get(sid)
    assert submission.state == "rejected"
    assert submission.reason == "internal error: FileNotFoundError (see the server log)"


def test_the_background_pool_records_a_bug_as_an_internal_error_and_goes_on(
    board: Board, flags: Path
) -> None:
    pool = VerificationPool(board.settings(), board.sessions, check=lb_checks.raises_once)
    pool.start()
    try:
        first, second = board.submit(ORACLE), board.submit(ORACLE, team="team-b")
        pool.wake()
        board.wait(second, ("verified", "rejected"))
    finally:
        pool.stop()
    key, _ = lb_checks.read_flag("raises")
    rejected = board.get(first)
    assert rejected.state == "rejected"
    assert rejected.reason == f"internal error: RuntimeError: an injected bug (episode {key})"
    _assert_verified(board, second)


def test_stop_kills_the_workers_and_leaves_the_submission_to_be_requeued(
    board: Board, flags: Path
) -> None:
    def runs_only(rows: list[dict], traces: dict) -> None:
        rows[:] = [r for r in rows if not r["reference"]]

    # As many workers as episodes: every episode is running when the workers are killed, and
    # their deaths must not read as a verdict.
    settings = board.settings(workers=6)
    pool = VerificationPool(settings, board.sessions, check=lb_checks.blocks)
    pool.start()
    try:
        sid = board.submit(edit(ORACLE, runs_only))
        pool.wake()
        deadline = time.monotonic() + WAIT_S
        while not lb_checks.flag("blocks").exists():
            assert time.monotonic() < deadline, "no episode started"
            time.sleep(0.1)
        _, pid = lb_checks.read_flag("blocks")
    finally:
        pool.stop()
    assert not pool.running
    assert not Path(f"/proc/{pid}").exists()
    assert board.get(sid).state == "verifying" and board.get(sid).episodes == []
    with board.sessions() as session:
        assert crud.requeue_verifying(session) == 1
    assert board.get(sid).state == "queued"


@pytest.fixture(scope="module")
def challenged(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Path]:
    """The heuristic team answering a challenge of the hidden-seed test suite."""
    work = tmp_path_factory.mktemp("lbw")
    path = write_challenge(work / "challenge.json", "ch-0001")
    run = run_suite(work / "test", "suite=test", f"challenge={path}", "baseline=heuristic")
    return pack_run(run["root"], work / "test.tar.gz", {"method": "H"}).read_bytes(), path


def test_a_challenge_submission_is_verified_against_its_stored_challenge(
    board: Board, challenged: tuple[bytes, Path]
) -> None:
    data, path = challenged
    with board.sessions() as session:
        team = crud.create_team(session, "team-a")
        crud.store_challenge(session, team.id, load_challenge(path), datetime.now(UTC))
    settings = board.settings()
    sid = board.submit(data, challenge_id="ch-0001")
    board.verify_all(settings, board.pool(settings).map)
    submission = board.get(sid)
    assert (submission.state, submission.reason) == ("verified", "")
    assert len(submission.episodes) == 4 and submission.entry is not None
    assert os.path.exists(board.bundle_file(sid))
