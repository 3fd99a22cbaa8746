"""The server's services called directly, without HTTP, on a real SQLite database and the
committed reference bundles: an accepted upload is a queued row and a stored archive, a resent
one answers with the first, a malformed or incomplete bundle is refused naming what is wrong
with nothing kept; verifying a good bundle puts it on the board with the metrics the server
recomputed, a forged one is rejected naming the episode and its archive is removed; a
challenge is drawn and kept for hidden-seed suites only, within the daily limit."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.core.archive import BundleError
from leaderboard.core.bundle import read_bundle, stored_form
from leaderboard.server import crud
from leaderboard.server.db import models
from leaderboard.server.db.session import open_database
from leaderboard.server.services import challenges, uploads, verification
from leaderboard.server.settings import Settings
from tests.helpers.lb_bundles import edit

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
ORACLE = (SEED / "oracle-smoke-v1.tar.gz").read_bytes()
FULL = "smoke-v1.n2.comm-on.full.skill"
TRANSPORT = "oracle/transport_produce_fridge_v0/test/n2/s0/comm1/run"


class Board:
    """A data directory, its SQLite database and one team, as the server has them."""

    def __init__(self, tmp_path: Path, **options: Any) -> None:
        self.settings = Settings(data_dir=tmp_path, secret=b"s" * 32, **options)
        self.sessions: sessionmaker[Session] = open_database(self.settings.database_url)
        uploads.prepare_storage(self.settings)
        with self.sessions() as session:
            self.team = crud.create_team(session, "team-a")

    def accept(self, data: bytes) -> uploads.Acceptance:
        return uploads.accept(io.BytesIO(data), self.team.id, self.settings, self.sessions)

    def count(self, model: type) -> int:
        with self.sessions() as session:
            return session.scalar(select(func.count()).select_from(model))

    def submission(self, submission_id: int) -> models.Submission:
        with self.sessions() as session:
            submission = crud.get_submission(session, submission_id)
            assert submission is not None
            return submission

    def kept(self) -> list[str]:
        """The files in the bundles directory, partial ones included."""
        return sorted(p.name for p in self.settings.bundles_dir.iterdir())


@pytest.fixture
def board(tmp_path: Path) -> Board:
    return Board(tmp_path)


def _without_transport(rows: list[dict], traces: dict) -> None:
    rows[:] = [r for r in rows if r["key"] != TRANSPORT]


def _metric_changed(rows: list[dict], traces: dict) -> None:
    next(r for r in rows if r["key"] == TRANSPORT)["L"] -= 3


# --- uploads ----------------------------------------------------------------------------------


def test_an_accepted_upload_is_a_queued_row_and_its_stored_form_on_disk(board: Board) -> None:
    accepted = board.accept(ORACLE)
    assert not accepted.existing
    row = board.submission(accepted.submission.id)
    assert (row.team_id, row.state, row.reason, row.track) == (board.team.id, "queued", "", FULL)
    assert (row.suite, row.suite_version, row.method) == ("smoke", "v1", "oracle")
    stored = stored_form(read_bundle(io.BytesIO(ORACLE)))
    assert row.bundle_sha256 == hashlib.sha256(stored).hexdigest()
    assert row.bundle_path.startswith("bundles/")
    assert (board.settings.data_dir / row.bundle_path).read_bytes() == stored
    assert board.kept() == [Path(row.bundle_path).name]


def test_the_same_bundle_again_answers_with_its_submission_and_keeps_nothing(board: Board) -> None:
    first = board.accept(ORACLE)
    again = board.accept(ORACLE)
    assert again.existing and again.submission.id == first.submission.id
    assert board.count(models.Submission) == 1
    assert len(board.kept()) == 1


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (b"not a gzip'd tar", "archive", "not a gzip'd tar archive"),
        (ORACLE[: len(ORACLE) // 2], "archive", "truncated"),
    ],
    ids=["not-an-archive", "truncated"],
)
def test_a_malformed_archive_is_refused_naming_what_is_wrong_and_nothing_is_kept(
    board: Board, data: bytes, field: str, message: str
) -> None:
    with pytest.raises(BundleError, match=message) as refused:
        board.accept(data)
    assert (refused.value.status, refused.value.field) == (400, field)
    assert board.count(models.Submission) == 0
    assert board.kept() == []


def test_a_bundle_missing_an_episode_of_its_track_is_refused_naming_it(board: Board) -> None:
    with pytest.raises(crud.Refused, match=f"does not hold the episodes of track {FULL}") as no:
        board.accept(edit(ORACLE, _without_transport))
    assert no.value.status == 422
    assert TRANSPORT in str(no.value)
    assert board.count(models.Submission) == 0
    assert board.kept() == []


def test_an_upload_past_the_hourly_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    board = Board(tmp_path, submissions_per_hour=1)
    board.accept(ORACLE)
    with pytest.raises(crud.Refused, match="1 submissions in the last hour") as limited:
        board.accept(b"never read")
    assert limited.value.status == 429
    assert board.count(models.Submission) == 1


def test_storage_is_prepared_without_the_bundles_a_dead_server_was_writing(
    tmp_path: Path,
) -> None:
    board = Board(tmp_path)
    kept = board.settings.data_dir / board.accept(ORACLE).submission.bundle_path
    (board.settings.bundles_dir / f"{uploads.PARTIAL_PREFIX}half.tar.gz").write_bytes(b"half")
    uploads.prepare_storage(board.settings)
    assert board.kept() == [kept.name]


# --- verification -----------------------------------------------------------------------------


def test_verifying_a_good_bundle_puts_it_on_the_board_with_recomputed_metrics(
    board: Board,
) -> None:
    submission_id = board.accept(ORACLE).submission.id
    bundle = read_bundle(io.BytesIO(ORACLE))
    assert verification.verify_next(board.settings, board.sessions) == submission_id
    assert verification.verify_next(board.settings, board.sessions) is None
    row = board.submission(submission_id)
    assert (row.state, row.reason) == ("verified", "")
    assert {e.key for e in row.episodes} == {r["key"] for r in bundle.rows}
    assert all(e.ok and e.reasons == [] for e in row.episodes)
    hashes = {r["key"]: r["trace_hash"] for r in bundle.rows}
    assert {e.key: e.trace_hash for e in row.episodes} == hashes
    assert next(e for e in row.episodes if e.key == TRANSPORT).metrics["SR"] == 1.0
    assert row.entry is not None and row.entry.track == FULL
    everything = row.entry.summary["families"]["all"]
    assert everything["episodes"] == 6
    assert (everything["SR"]["mean"], everything["SR"]["successes"]) == (1.0, 6)
    assert (board.settings.data_dir / row.bundle_path).is_file()


def test_a_forged_metric_is_rejected_naming_the_episode_and_its_archive_removed(
    board: Board,
) -> None:
    submission_id = board.accept(edit(ORACLE, _metric_changed)).submission.id
    kept = board.settings.data_dir / board.submission(submission_id).bundle_path
    assert kept.is_file()
    state = verification.verify_submission(
        board.settings, board.sessions, _claimed(board, submission_id)
    )
    assert state == "rejected"
    row = board.submission(submission_id)
    assert row.state == "rejected"
    assert row.reason.startswith(f"1 of 12 episodes failed verification: {TRANSPORT}: ")
    assert "L" in row.reason
    assert [e.key for e in row.episodes if not e.ok] == [TRANSPORT]
    assert row.entry is None
    assert not kept.exists()


def _claimed(board: Board, submission_id: int) -> int:
    with board.sessions() as session:
        claimed = crud.claim_next(session)
        assert claimed is not None and claimed.id == submission_id
        return claimed.id


# --- challenges -------------------------------------------------------------------------------


def test_a_challenge_is_drawn_for_the_team_and_kept(tmp_path: Path) -> None:
    board = Board(tmp_path, challenge_scenes=1)
    with board.sessions() as session:
        challenge = challenges.issue(session, board.team.id, "team-a", "test", board.settings)
    assert (challenge.team, challenge.suite) == ("team-a", "test")
    assert challenge.episodes
    with board.sessions() as session:
        row = session.get(models.Challenge, challenge.id)
        assert row is not None and row.team_id == board.team.id
        assert crud.as_challenge(row) == challenge


def test_challenges_come_from_hidden_seed_suites_within_the_daily_limit(tmp_path: Path) -> None:
    board = Board(tmp_path, challenge_scenes=1, challenges_per_day=1)
    with board.sessions() as session:
        with pytest.raises(crud.Refused, match="'smoke' is not a hidden-seed suite") as public:
            challenges.issue(session, board.team.id, "team-a", "smoke", board.settings)
        assert public.value.status == 422
        challenges.issue(session, board.team.id, "team-a", "test", board.settings)
        with pytest.raises(crud.Refused, match="1 challenges in the last 24 hours") as limited:
            challenges.issue(session, board.team.id, "team-a", "test", board.settings)
        assert limited.value.status == 429
    assert board.count(models.Challenge) == 1
