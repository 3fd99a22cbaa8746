"""The leaderboard's database functions on SQLite and on a real PostgreSQL: teams, the
submission queue (atomic claims, requeue on restart), verdicts written whole, reproductions,
challenges (foreign, expired, reused, daily limit) and track listings."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.lb_db import DATABASES, fresh_engine
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from benchmark.runner.challenge import Challenge, ChallengeEpisode
from leaderboard import crud
from leaderboard.db.models import Entry, EpisodeResult, Submission
from leaderboard.db.session import make_sessions, upgrade

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TRACK = "smoke-v1.n2.comm-on.partial.skill"


@pytest.fixture(params=DATABASES)
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    with fresh_engine(request.param, request, tmp_path) as engine:
        upgrade(engine)
        yield make_sessions(engine)


@dataclass(frozen=True)
class Check:
    """One episode's verification outcome (the shape of leaderboard.verify.EpisodeCheck)."""

    key: str
    ok: bool = True
    reasons: tuple[str, ...] = ()
    metrics: dict[str, Any] = field(default_factory=lambda: {"SR": 1.0, "L": 12})
    trace_hash: str = "h0"


def _upload(track: str = TRACK, challenge_id: str | None = None, **fields: Any) -> crud.Upload:
    suite, version = track.split(".")[0].rsplit("-", 1)
    return crud.Upload(
        track=track,
        suite=suite,
        suite_version=version,
        bundle_path=f"/bundles/{len(fields)}.tar.gz",
        bundle_sha256="ab" * 32,
        fields={"method": "oracle", **fields},
        challenge_id=challenge_id,
    )


def _submit(session: Session, team_id: int, upload: crud.Upload | None = None, **kw: Any) -> int:
    return crud.store_submission(session, team_id, upload or _upload(), daily_limit=3, **kw).id


def _count(session: Session, model: type) -> int:
    return session.scalar(select(func.count()).select_from(model))


def _verified(session: Session, submission_id: int, hashes: tuple[str, ...], **kw: Any) -> None:
    crud.record_verdict(
        session,
        submission_id,
        ok=True,
        reason="",
        episodes=[Check(f"k{i}", trace_hash=h) for i, h in enumerate(hashes)],
        summary={"families": {"all": {"SR": {"mean": 1.0, "lo": 0.5, "hi": 1.0}}}},
        trace_hashes=hashes,
        **kw,
    )


def _in_threads(work: Callable[[int], Any], n: int) -> list[Any]:
    """Run ``work(i)`` in ``n`` threads started together; their results (or exceptions)."""
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = work(i)
        except Exception as err:  # returned to the test, which asserts on it
            out[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


# --- teams ------------------------------------------------------------------------------------


def test_team_names_are_stored_as_given_and_bad_ones_refused(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "<script>alert('x')</script> & co", T0)
    with sessions() as s:
        assert crud.team_by_name(s, "<script>alert('x')</script> & co").id == team.id
        for bad, words in [("", "empty"), ("   ", "empty"), ("x" * 65, "at most 64"),
                           ("a\nb", "control")]:  # fmt: skip
            with pytest.raises(crud.Refused, match=words) as err:
                crud.create_team(s, bad)
            assert err.value.status == 422
        with pytest.raises(crud.Refused, match="taken") as err:
            crud.create_team(s, "<script>alert('x')</script> & co")
        assert err.value.status == 409
        assert [t.name for t in crud.list_teams(s)] == ["<script>alert('x')</script> & co"]
        assert crud.create_team(s, "y" * 64).name == "y" * 64


# --- the queue --------------------------------------------------------------------------------


def test_a_stored_submission_is_queued_with_its_submission_fields(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a", T0)
        upload = _upload(description="plans first", parameters=135_000_000, llm_tokens=9000)
        sid = _submit(s, team.id, upload, now=T0)
    with sessions() as s:
        sub = crud.get_submission(s, sid)
        assert (sub.state, sub.reason, sub.track, sub.suite, sub.suite_version) == (
            "queued", "", TRACK, "smoke", "v1",
        )  # fmt: skip
        assert (sub.method, sub.description, sub.model, sub.parameters, sub.llm_tokens) == (
            "oracle", "plans first", "", 135_000_000, 9000,
        )  # fmt: skip
        assert sub.created_at == sub.updated_at == T0 and sub.episodes == []
    with pytest.raises(ValueError, match=r"unknown submission.yaml field\(s\) \['SR'\]"):
        _upload(SR=1.0)
    with pytest.raises(ValueError, match="'method' is required"):
        crud.Upload(TRACK, "smoke", "v1", "p", "h", {"model": "m"})


def test_claims_hand_out_the_oldest_queued_submission_once(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        ids = [_submit(s, team.id) for _ in range(3)]
        claimed = [crud.claim_next(s, T0) for _ in range(4)]
    assert [c.id if c else None for c in claimed] == [*ids, None]
    with sessions() as s:
        assert {crud.get_submission(s, i).state for i in ids} == {"verifying"}


def test_concurrent_claims_never_hand_out_a_submission_twice(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        ids = [_submit(s, team.id) for _ in range(24)]

    def drain(_: int) -> list[int]:
        got = []
        with sessions() as s:
            while (sub := crud.claim_next(s)) is not None:
                got.append(sub.id)
        return got

    results = _in_threads(drain, 4)
    claimed = [i for r in results for i in r]
    assert sorted(claimed) == ids


def test_a_restart_requeues_what_was_verifying(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        ids = [_submit(s, team.id) for _ in range(3)]
        crud.claim_next(s)
        crud.claim_next(s)
        crud.record_verdict(s, ids[0], ok=False, reason="bad", episodes=[])
        assert crud.requeue_verifying(s, T0) == 1
    with sessions() as s:
        states = [crud.get_submission(s, i).state for i in ids]
        assert states == ["rejected", "queued", "queued"]
        assert crud.claim_next(s).id == ids[1]


# --- verdicts ---------------------------------------------------------------------------------


def test_a_verified_submission_gets_its_episodes_and_an_entry(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        sid = _submit(s, team.id, now=T0)
        crud.claim_next(s)
        _verified(s, sid, ("h1", "h2"), now=T0 + timedelta(minutes=5))
    with sessions() as s:
        sub = crud.get_submission(s, sid)
        assert (sub.state, sub.reproduction_of_id) == ("verified", None)
        assert sub.updated_at == T0 + timedelta(minutes=5)
        assert [(e.key, e.ok, e.trace_hash, e.metrics) for e in sub.episodes] == [
            ("k0", True, "h1", {"SR": 1.0, "L": 12}),
            ("k1", True, "h2", {"SR": 1.0, "L": 12}),
        ]
        assert sub.entry.summary["families"]["all"]["SR"]["lo"] == 0.5
        assert sub.entry.traces_digest == crud.traces_digest({"h2", "h1"})
        assert [e.submission_id for e in crud.track_entries(s, TRACK)] == [sid]


def test_a_rejected_submission_keeps_its_reasons_and_gets_no_entry(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        sid = _submit(s, team.id)
        crud.claim_next(s)
        bad = Check("k1", ok=False, reasons=("actions[3]: 'pickup x' != 'pickup y'",), metrics={})
        crud.record_verdict(s, sid, ok=False, reason="1 of 2 episodes failed",
                            episodes=[Check("k0"), bad])  # fmt: skip
    with sessions() as s:
        sub = crud.get_submission(s, sid)
        assert (sub.state, sub.reason, sub.entry) == ("rejected", "1 of 2 episodes failed", None)
        assert [(e.key, e.ok, e.reasons) for e in sub.episodes] == [
            ("k0", True, []),
            ("k1", False, ["actions[3]: 'pickup x' != 'pickup y'"]),
        ]
        assert _count(s, Entry) == 0


def test_only_a_verifying_submission_takes_a_verdict(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        sid = _submit(s, team.id)
        with pytest.raises(ValueError, match="is queued, not verifying"):
            _verified(s, sid, ("h1",))
        crud.claim_next(s)
        _verified(s, sid, ("h1",))
        with pytest.raises(ValueError, match="is verified, not verifying"):
            _verified(s, sid, ("h1",))
        other = _submit(s, team.id)
        crud.claim_next(s)
        with pytest.raises(ValueError, match="needs its summary and trace hashes"):
            crud.record_verdict(s, other, ok=True, reason="", episodes=[])
        assert crud.get_submission(s, other).state == "verifying"
        with pytest.raises(ValueError, match="999 is unknown"):
            _verified(s, 999, ("h1",))
        assert _count(s, EpisodeResult) == 1 and _count(s, Entry) == 1


def test_a_verdict_that_cannot_be_written_leaves_nothing_behind(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        sid = _submit(s, team.id)
        crud.claim_next(s)
        with pytest.raises(IntegrityError):  # two results for one episode key
            crud.record_verdict(
                s,
                sid,
                ok=True,
                reason="",
                episodes=[Check("k0"), Check("k0")],
                summary={"families": {}},
                trace_hashes=("h1",),
            )
        s.rollback()
    with sessions() as s:
        sub = crud.get_submission(s, sid)
        assert (sub.state, sub.episodes, sub.entry) == ("verifying", [], None)
        assert _count(s, Entry) == 0


def test_identical_traces_make_a_reproduction_not_a_second_entry(sessions: sessionmaker) -> None:
    other_track = "smoke-v1.n2.comm-off.partial.skill"
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b")
        first = _submit(s, a.id)
        again = _submit(s, b.id)
        elsewhere = _submit(s, b.id, _upload(other_track))
        different = _submit(s, b.id)
        for sid, hashes in [(first, ("h1", "h2")), (again, ("h2", "h1")),
                            (elsewhere, ("h1", "h2")), (different, ("h1", "h3"))]:  # fmt: skip
            assert crud.claim_next(s).id == sid
            _verified(s, sid, hashes)
    with sessions() as s:
        assert crud.get_submission(s, again).reproduction_of_id == first
        assert crud.get_submission(s, again).entry is None
        assert [r.id for r in crud.reproductions(s, first)] == [again]
        assert [e.submission_id for e in crud.track_entries(s, TRACK)] == [first, different]
        assert [e.submission_id for e in crud.track_entries(s, other_track)] == [elsewhere]


def test_concurrent_verdicts_with_identical_traces_make_one_entry(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        ids = [_submit(s, team.id) for _ in range(4)]
        for _ in ids:
            crud.claim_next(s)

    def verdict(i: int) -> None:
        with sessions() as s:
            _verified(s, ids[i], ("h1", "h2"))

    assert _in_threads(verdict, len(ids)) == [None] * len(ids)
    with sessions() as s:
        entries = crud.track_entries(s, TRACK)
        assert len(entries) == 1
        subs = [crud.get_submission(s, i) for i in ids]
        assert {x.state for x in subs} == {"verified"}
        assert sorted(x.reproduction_of_id or 0 for x in subs) == sorted(
            [0] + [entries[0].submission_id] * 3
        )


def test_tracks_and_attempts_count_per_track_and_team(sessions: sessionmaker) -> None:
    other_track = "default-v1.n3.comm-on.partial.skill"
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b")
        subs = [_submit(s, a.id), _submit(s, a.id), _submit(s, b.id, _upload(other_track))]
        for sid, hashes in zip(subs, [("h1",), ("h2",), ("h1",)], strict=True):
            crud.claim_next(s)
            _verified(s, sid, hashes)
        _submit(s, a.id)  # still queued: an attempt, not an entry
        assert crud.tracks(s) == sorted([(TRACK, 2), (other_track, 1)])
        assert crud.attempts(s, TRACK) == {a.id: 3}
        assert crud.attempts(s, other_track) == {b.id: 1}


# --- challenges -------------------------------------------------------------------------------


def _challenge(team: str, cid: str = "ch-1", expires: datetime = T0 + timedelta(days=3)):
    return Challenge(
        id=cid,
        suite="test",
        suite_version="v1",
        team=team,
        expires=expires.isoformat(),
        episodes=(ChallengeEpisode("prepare_toast_v0", "FloorPlan26", 1234567, 2),),
    )


TEST_TRACK = "test-v1.n2.comm-on.partial.skill"


def test_a_stored_challenge_reads_back_as_issued(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        crud.store_challenge(s, team.id, _challenge("a"), issued_at=T0)
    with sessions() as s:
        row = crud.usable_challenge(s, "ch-1", team.id, "test", "v1", now=T0)
        assert crud.as_challenge(row) == _challenge("a")
        assert row.issued_at == T0


def test_a_test_submission_needs_a_live_unused_challenge_of_its_team(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b")
        crud.store_challenge(s, a.id, _challenge("a", "ch-a"), issued_at=T0)
        crud.store_challenge(s, a.id, _challenge("a", "ch-old", T0 + timedelta(hours=1)), T0)
        crud.store_challenge(s, b.id, _challenge("b", "ch-b"), issued_at=T0)
        later = T0 + timedelta(hours=2)
        refusals = [
            (_upload(TEST_TRACK, "ch-none"), 422, "never issued"),
            (_upload(TEST_TRACK, "ch-b"), 403, "issued to another team"),
            (_upload(TEST_TRACK, "ch-old"), 403, "expired at 2030-01-01T13:00:00"),
            (_upload(challenge_id="ch-a"), 422, "is for suite test v1, the submission is for "
             "smoke v1"),
        ]  # fmt: skip
        for upload, status, words in refusals:
            with pytest.raises(crud.Refused, match=words) as err:
                _submit(s, a.id, upload, now=later)
            assert err.value.status == status
        assert _count(s, Submission) == 0
        sid = _submit(s, a.id, _upload(TEST_TRACK, "ch-a"), now=later)
        with pytest.raises(crud.Refused, match=f"already answered by submission {sid}") as err:
            _submit(s, a.id, _upload(TEST_TRACK, "ch-a"), now=later)
        assert err.value.status == 409
    with sessions() as s:
        assert crud.get_submission(s, sid).challenge.id == "ch-a"
        assert _count(s, Submission) == 1


def test_concurrent_answers_to_one_challenge_store_one(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        crud.store_challenge(s, team.id, _challenge("a"), issued_at=T0)

    def answer(_: int) -> int:
        with sessions() as s:
            return _submit(s, team.id, _upload(TEST_TRACK, "ch-1"), now=T0)

    results = _in_threads(answer, 4)
    stored = [r for r in results if isinstance(r, int)]
    refused = [r for r in results if isinstance(r, crud.Refused)]
    assert len(stored) == 1 and len(refused) == 3
    assert {r.status for r in refused} == {409}


def test_the_daily_limit_counts_test_submissions_of_the_last_24_hours(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        for k in range(4):
            crud.store_challenge(s, team.id, _challenge("a", f"ch-{k}"), issued_at=T0)

        def submit(k: int, at: datetime) -> int:
            upload = _upload(TEST_TRACK, f"ch-{k}")
            return crud.store_submission(s, team.id, upload, daily_limit=2, now=at).id

        submit(0, T0)
        _submit(s, team.id, now=T0)  # a public-track submission does not count
        submit(1, T0 + timedelta(hours=1))
        with pytest.raises(crud.Refused, match="2 test submissions in the last 24 hours") as err:
            submit(2, T0 + timedelta(hours=23))
        assert err.value.status == 429
        assert crud.challenge_submissions_since(s, team.id, T0 - timedelta(days=1)) == 2
        submit(2, T0 + timedelta(hours=24, seconds=1))
        with pytest.raises(crud.Refused, match="limit is 2 a day"):
            submit(3, T0 + timedelta(hours=24, seconds=2))
