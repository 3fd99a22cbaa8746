"""The leaderboard's database functions on SQLite and on a real PostgreSQL: teams, the
submission queue (atomic claims, requeue on restart), verdicts written whole, reproductions,
challenges (foreign, expired, reused or rejected answers, daily limit) and track listings.
Credit (another team's traces, own resubmissions, attempts) is tested in test_lb_credit.py and
limits under concurrency in test_lb_races.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers.lb_crud import (
    T0,
    TEST_TRACK,
    TRACK,
    Check,
    challenge,
    count,
    in_threads,
    submit,
    upload,
    verified,
)
from helpers.lb_db import DATABASES, fresh_engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.server import crud
from leaderboard.server.db.models import Entry, EpisodeResult, Submission
from leaderboard.server.db.session import make_sessions, upgrade


@pytest.fixture(params=DATABASES)
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    with fresh_engine(request.param, request, tmp_path) as engine:
        upgrade(engine)
        yield make_sessions(engine)


# --- teams ------------------------------------------------------------------------------------


def test_team_names_are_stored_as_given_and_bad_ones_refused(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "<script>alert('x')</script> & co", T0)
    with sessions() as s:
        assert crud.team_by_name(s, "<script>alert('x')</script> & co").id == team.id
        for bad, words in [("", "empty"), ("   ", "empty"), ("x" * 65, "at most 64"),
                           ("a\nb", "control"),
                           ("tnerruc\u202e", r"U\+202E \(RIGHT-TO-LEFT OVERRIDE\)"),
                           ("a\u200bb", r"U\+200B \(ZERO WIDTH SPACE\)"),
                           ("\u2066x\u2069", r"U\+2066 \(LEFT-TO-RIGHT ISOLATE\)")]:  # fmt: skip
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
        stored = upload(description="plans first", parameters=135_000_000, llm_tokens=9000)
        sid = submit(s, team.id, stored, now=T0)
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
        upload(SR=1.0)
    with pytest.raises(ValueError, match="'method' is required"):
        crud.Upload(TRACK, "smoke", "v1", "p", "h", {"model": "m"})


def test_claims_hand_out_the_oldest_queued_submission_once(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        ids = [submit(s, team.id) for _ in range(3)]
        claimed = [crud.claim_next(s, T0) for _ in range(4)]
    assert [c.id if c else None for c in claimed] == [*ids, None]
    with sessions() as s:
        assert {crud.get_submission(s, i).state for i in ids} == {"verifying"}


def test_concurrent_claims_never_hand_out_a_submission_twice(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        ids = [submit(s, team.id) for _ in range(24)]

    def drain(_: int) -> list[int]:
        got = []
        with sessions() as s:
            while (sub := crud.claim_next(s)) is not None:
                got.append(sub.id)
        return got

    results = in_threads(drain, 4)
    claimed = [i for r in results for i in r]
    assert sorted(claimed) == ids


def test_a_restart_requeues_what_was_verifying(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        ids = [submit(s, team.id) for _ in range(3)]
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
        sid = submit(s, team.id, now=T0)
        crud.claim_next(s)
        verified(s, sid, ("h1", "h2"), now=T0 + timedelta(minutes=5))
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
        sid = submit(s, team.id)
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
        assert count(s, Entry) == 0


def test_only_a_verifying_submission_takes_a_verdict(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        sid = submit(s, team.id)
        with pytest.raises(ValueError, match="is queued, not verifying"):
            verified(s, sid, ("h1",))
        crud.claim_next(s)
        verified(s, sid, ("h1",))
        with pytest.raises(ValueError, match="is verified, not verifying"):
            verified(s, sid, ("h1",))
        other = submit(s, team.id)
        crud.claim_next(s)
        with pytest.raises(ValueError, match="needs its summary and trace hashes"):
            crud.record_verdict(s, other, ok=True, reason="", episodes=[])
        assert crud.get_submission(s, other).state == "verifying"
        with pytest.raises(ValueError, match="999 is unknown"):
            verified(s, 999, ("h1",))
        assert count(s, EpisodeResult) == 1 and count(s, Entry) == 1


def test_a_verdict_that_cannot_be_written_leaves_nothing_behind(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        sid = submit(s, team.id)
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
        assert count(s, Entry) == 0


def test_identical_traces_make_a_reproduction_not_a_second_entry(sessions: sessionmaker) -> None:
    other_track = "smoke-v1.n2.comm-off.partial.skill"
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b")
        first = submit(s, a.id)
        again = submit(s, b.id)
        elsewhere = submit(s, b.id, upload(other_track))
        different = submit(s, b.id)
        for sid, hashes in [(first, ("h1", "h2")), (again, ("h2", "h1")),
                            (elsewhere, ("h1", "h2")), (different, ("h3", "h4"))]:  # fmt: skip
            assert crud.claim_next(s).id == sid
            verified(s, sid, hashes)
    with sessions() as s:
        assert crud.get_submission(s, again).reproduction_of_id == first
        assert crud.get_submission(s, again).entry is None
        assert [r.id for r in crud.reproductions(s, first)] == [again]
        assert [e.submission_id for e in crud.track_entries(s, TRACK)] == [first, different]
        assert [e.submission_id for e in crud.track_entries(s, other_track)] == [elsewhere]


def test_concurrent_verdicts_with_identical_traces_make_one_entry(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        ids = [submit(s, team.id) for _ in range(4)]
        for _ in ids:
            crud.claim_next(s)

    def verdict(i: int) -> None:
        with sessions() as s:
            verified(s, ids[i], ("h1", "h2"))

    assert in_threads(verdict, len(ids)) == [None] * len(ids)
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
        subs = [submit(s, a.id), submit(s, a.id), submit(s, b.id, upload(other_track))]
        for sid, hashes in zip(subs, [("h1",), ("h2",), ("h1",)], strict=True):
            crud.claim_next(s)
            verified(s, sid, hashes)
        submit(s, a.id)  # still queued: an attempt, not an entry
        assert crud.tracks(s) == sorted([(TRACK, 2), (other_track, 1)])
        assert crud.attempts(s, TRACK) == {a.id: 3}
        assert crud.attempts(s, other_track) == {b.id: 1}


# --- challenges -------------------------------------------------------------------------------


def test_a_stored_challenge_reads_back_as_issued(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        crud.store_challenge(s, team.id, challenge("a"), issued_at=T0)
    with sessions() as s:
        row = crud.usable_challenge(s, "ch-1", team.id, "test", "v1", now=T0)
        assert crud.as_challenge(row) == challenge("a")
        assert row.issued_at == T0


def test_a_test_submission_needs_a_live_unused_challenge_of_its_team(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b")
        crud.store_challenge(s, a.id, challenge("a", "ch-a"), issued_at=T0)
        crud.store_challenge(s, a.id, challenge("a", "ch-old", T0 + timedelta(hours=1)), T0)
        crud.store_challenge(s, b.id, challenge("b", "ch-b"), issued_at=T0)
        later = T0 + timedelta(hours=2)
        refusals = [
            (upload(TEST_TRACK, "ch-none"), 422, "never issued"),
            (upload(TEST_TRACK, "ch-b"), 403, "issued to another team"),
            (upload(TEST_TRACK, "ch-old"), 403, "expired at 2030-01-01T13:00:00"),
            (upload(challenge_id="ch-a"), 422, "is for suite test v1, the submission is for "
             "smoke v1"),
        ]  # fmt: skip
        for bad, status, words in refusals:
            with pytest.raises(crud.Refused, match=words) as err:
                submit(s, a.id, bad, now=later)
            assert err.value.status == status
        assert count(s, Submission) == 0
        sid = submit(s, a.id, upload(TEST_TRACK, "ch-a"), now=later)
        with pytest.raises(crud.Refused, match=f"already answered by submission {sid}") as err:
            submit(s, a.id, upload(TEST_TRACK, "ch-a"), now=later)
        assert err.value.status == 409
    with sessions() as s:
        assert crud.get_submission(s, sid).challenge.id == "ch-a"
        assert count(s, Submission) == 1


def test_concurrent_answers_to_one_challenge_store_one(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        crud.store_challenge(s, team.id, challenge("a"), issued_at=T0)

    def answer(_: int) -> int:
        with sessions() as s:
            return submit(s, team.id, upload(TEST_TRACK, "ch-1"), now=T0)

    results = in_threads(answer, 4)
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
            crud.store_challenge(s, team.id, challenge("a", f"ch-{k}"), issued_at=T0)

        def answer(k: int, at: datetime) -> int:
            stored = upload(TEST_TRACK, f"ch-{k}")
            return crud.store_submission(s, team.id, stored, daily_limit=2, now=at).id

        answer(0, T0)
        submit(s, team.id, now=T0)  # a public-track submission does not count
        answer(1, T0 + timedelta(hours=1))
        with pytest.raises(crud.Refused, match="2 test submissions in the last 24 hours") as err:
            answer(2, T0 + timedelta(hours=23))
        assert err.value.status == 429
        assert crud.challenge_submissions_since(s, team.id, T0 - timedelta(days=1)) == 2
        answer(2, T0 + timedelta(hours=24, seconds=1))
        with pytest.raises(crud.Refused, match="limit is 2 a day"):
            answer(3, T0 + timedelta(hours=24, seconds=2))


def test_a_rejected_answer_uses_its_challenge_up(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        crud.store_challenge(s, team.id, challenge("a", "ch-a"), issued_at=T0)
        sid = submit(s, team.id, upload(TEST_TRACK, "ch-a"), now=T0)
        crud.claim_next(s)
        crud.record_verdict(s, sid, ok=False, reason="1 of 1 episodes failed", episodes=[])
        with pytest.raises(crud.Refused) as err:
            submit(s, team.id, upload(TEST_TRACK, "ch-a"), now=T0)
        assert err.value.status == 409
        assert str(err.value) == (
            f"challenge 'ch-a' was already answered by submission {sid} (rejected); an answer "
            "uses a challenge up, rejected or not: request a new challenge"
        )
        assert count(s, Submission) == 1
