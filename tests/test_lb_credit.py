"""Credit goes to the team whose traces they are, on SQLite and on a real PostgreSQL: a set of
traces holding some of another team's entry is rejected naming the entry (and two such verdicts
racing never both get an entry), a team's own resubmission is no reproduction of itself,
reproductions count distinct other teams, and on a hidden-seed track every challenge drawn is
an attempt. The copy is also sent to the real server, built from the committed baselines'
bundles the way a team copying public traces would build it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from helpers.lb_bundles import archive, copy_of, members
from helpers.lb_crud import (
    T0,
    TEST_TRACK,
    TRACK,
    challenge,
    count,
    in_threads,
    submit,
    upload,
    verified,
)
from helpers.lb_db import DATABASES, fresh_engine
from helpers.lb_server import Server
from helpers.postgres import PostgresCluster
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.core.bundle import SUBMISSION
from leaderboard.server import crud
from leaderboard.server.db.models import Entry, Submission
from leaderboard.server.db.session import make_sessions, upgrade

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
HEURISTIC = (SEED / "heuristic-smoke-v1.tar.gz").read_bytes()
RANDOM = (SEED / "random-smoke-v1.tar.gz").read_bytes()
CREDIT = (
    "a submission is credited only with its team's own traces (the whole set of an entry's "
    "traces is a reproduction of it)"
)


@pytest.fixture(params=DATABASES)
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    with fresh_engine(request.param, request, tmp_path) as engine:
        upgrade(engine)
        yield make_sessions(engine)


def _claimed(session: Session, team_id: int, **kw: object) -> int:
    """A submission of ``team_id``, stored and claimed for verification; its id."""
    sid = submit(session, team_id, **kw)
    assert crud.claim_next(session).id == sid
    return sid


def _entry_id(session: Session, submission_id: int) -> int:
    return session.scalar(select(Entry.id).where(Entry.submission_id == submission_id))


# --- another team's traces --------------------------------------------------------------------


def test_a_set_holding_another_teams_traces_is_rejected_naming_the_entry(
    sessions: sessionmaker,
) -> None:
    theirs = tuple(f"a{i}" for i in range(6))
    own = tuple(f"b{i}" for i in range(6))
    mixed = (*theirs[:5], own[0])
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b's")
        original = _claimed(s, a.id)
        verified(s, original, theirs)
        b_entry = _claimed(s, b.id)
        verified(s, b_entry, own)
        copy = _claimed(s, b.id)
        verified(s, copy, mixed)
        entry = _entry_id(s, original)
        reason = f"5 of its 6 run episodes are traces of entry {entry} by team 'a': {CREDIT}"
        sub = crud.get_submission(s, copy)
        assert (sub.state, sub.reason, sub.entry) == ("rejected", reason, None)
        assert [e.trace_hash for e in sub.episodes] == list(mixed)  # the replays are kept
        assert crud.copied_from(s, b.id, TRACK, mixed) == reason
        # The whole set is a reproduction; a team's own traces are its own; a trace of
        # another track or of nobody is nobody's.
        assert crud.copied_from(s, b.id, TRACK, theirs) is None
        assert crud.copied_from(s, a.id, TRACK, (*theirs[:5], "x")) is None
        assert crud.copied_from(s, b.id, "smoke-v1.n2.comm-off.partial.skill", mixed) is None
        assert crud.copied_from(s, b.id, TRACK, ("x1", "x2")) is None

        reproduction = _claimed(s, b.id)
        verified(s, reproduction, theirs[::-1])
        again = _claimed(s, b.id)
        verified(s, again, mixed)  # a reproduction does not make the traces b's
        assert crud.get_submission(s, reproduction).reproduction_of_id == original
        assert crud.get_submission(s, again).reason == reason

        reworked = _claimed(s, a.id)
        verified(s, reworked, (*theirs[:5], "a6"))
        assert crud.get_submission(s, reworked).entry is not None

        both = _claimed(s, crud.create_team(s, "c").id)
        verified(s, both, (own[1], own[2], theirs[0], "c3", "c4", "c5"))
        assert crud.get_submission(s, both).reason == (
            f"2 of its 6 run episodes are traces of entry {_entry_id(s, b_entry)} by team "
            f"\"b's\"; 1 of its 6 run episodes are traces of entry {entry} by team 'a': {CREDIT}"
        )
        entries = [e.submission_id for e in crud.track_entries(s, TRACK)]
        assert entries == [original, b_entry, reworked]


def test_racing_verdicts_sharing_a_trace_give_one_entry(sessions: sessionmaker) -> None:
    with sessions() as s:
        teams = [crud.create_team(s, f"t{i}").id for i in range(8)]
        ids = [_claimed(s, team) for team in teams]

    def verdict(i: int) -> None:
        with sessions() as s:
            verified(s, ids[i], ("shared", f"own{i}"))

    assert in_threads(verdict, len(ids)) == [None] * len(ids)
    with sessions() as s:
        entries = crud.track_entries(s, TRACK)
        assert len(entries) == 1
        subs = [crud.get_submission(s, i) for i in ids]
        rejected = [x for x in subs if x.state == "rejected"]
        assert len(rejected) == len(ids) - 1
        assert {x.reason.split(":")[0] for x in rejected} == {
            f"1 of its 2 run episodes are traces of entry {entries[0].id} by team "
            f"'{entries[0].team.name}'"
        }


# --- own resubmissions and reproductions ------------------------------------------------------


def test_a_teams_earlier_upload_of_the_same_bytes_is_found_unless_rejected(
    sessions: sessionmaker,
) -> None:
    same = upload(sha256="ab" * 32)
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b")
        assert crud.same_upload(s, a.id, "ab" * 32) is None
        rejected = _claimed(s, a.id, stored=same)
        crud.record_verdict(s, rejected, ok=False, reason="bad", episodes=[])
        assert crud.same_upload(s, a.id, "ab" * 32) is None
        queued = submit(s, a.id, same)
        assert crud.same_upload(s, a.id, "ab" * 32).id == queued
        # Storing the same bundle again (two identical uploads racing) stores nothing.
        with pytest.raises(crud.AlreadyUploaded) as again:
            submit(s, a.id, same)
        assert again.value.submission.id == queued
        submit(s, a.id, upload(sha256="cd" * 32))
        assert crud.same_upload(s, b.id, "ab" * 32) is None
        assert submit(s, b.id, same) != queued  # another team's upload is its own
        crud.claim_next(s)
        verified(s, queued, ("h1",))
        assert crud.same_upload(s, a.id, "ab" * 32).id == queued


def test_reproductions_count_distinct_other_teams_not_the_entrys_own(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        a, b, c = (crud.create_team(s, n) for n in "abc")
        original = _claimed(s, a.id)
        verified(s, original, ("h1", "h2"))
        other = _claimed(s, a.id)
        verified(s, other, ("h3", "h4"))
        own_again = _claimed(s, a.id)  # another description, the same traces
        verified(s, own_again, ("h2", "h1"))
        b_first, b_second, c_first = (_claimed(s, t.id) for t in (b, b, c))
        for sid in (b_first, b_second, c_first):
            verified(s, sid, ("h1", "h2"))
        b_other = _claimed(s, b.id)
        verified(s, b_other, ("h4", "h3"))
        assert crud.get_submission(s, own_again).reproduction_of_id == original
        assert crud.get_submission(s, own_again).state == "verified"
        assert crud.reproduction_counts(s, [original, other]) == {original: 2, other: 1}
        assert [x.id for x in crud.reproductions(s, original)] == [b_first, c_first]
        assert [x.team.name for x in crud.reproductions(s, other)] == ["b"]
        assert crud.reproduction_counts(s, []) == {}
        assert count(s, Entry) == 2


# --- attempts ---------------------------------------------------------------------------------


def test_every_challenge_drawn_is_an_attempt_on_a_hidden_seed_track(
    sessions: sessionmaker,
) -> None:
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b")
        for k in range(3):
            crud.store_challenge(s, a.id, challenge("a", f"ch-a{k}"), issued_at=T0)
        crud.store_challenge(s, b.id, challenge("b", "ch-b"), issued_at=T0)
        crud.store_challenge(s, b.id, challenge("b", "ch-b0", suite_version="v0"), T0)
        submit(s, a.id, upload(TEST_TRACK, "ch-a1"), now=T0 + timedelta(hours=1))
        assert crud.attempts(s, TEST_TRACK) == {a.id: 3, b.id: 1}
        assert crud.attempts(s, "test-v0.n2.comm-on.partial.skill") == {b.id: 1}
        # A track of published seeds counts submissions.
        submit(s, b.id)
        assert crud.attempts(s, TRACK) == {b.id: 1}


# --- on the real server -----------------------------------------------------------------------


@pytest.fixture(params=DATABASES)
def server(
    request: pytest.FixtureRequest, tmp_path: Path, postgres: PostgresCluster
) -> Iterator[Server]:
    db_url = ""
    if request.param == "postgresql":
        db_url = postgres.create_database("credit")
        request.addfinalizer(lambda: postgres.drop_database(db_url))
    with Server(tmp_path / "data", db_url=db_url, workers=1).start() as board:
        yield board


def _final(board: Server, token: str, data: bytes) -> dict:
    accepted = board.upload(token, data)
    assert accepted.status_code == 202, accepted.text
    return board.wait(accepted.json()["id"])


def test_another_teams_public_traces_in_a_new_bundle_are_refused_on_the_server(
    server: Server,
) -> None:
    a, b = server.team("first"), server.team("copier")
    original = _final(server, a, HEURISTIC)
    assert original["state"] == "verified" and original["entry"] is not None
    own = _final(server, b, RANDOM)
    assert own["state"] == "verified" and own["entry"] is not None

    copy = copy_of(RANDOM, HEURISTIC, 5)
    expected = (
        f"5 of its 6 run episodes are traces of entry {original['entry']} by team 'first': {CREDIT}"
    )
    with server.sessions()() as session:
        stored = session.scalar(select(func.count(Submission.id)))
    response = server.upload(b, copy)
    # Refused at once, naming the entry, and nothing stored (a copy that races past this
    # check is rejected by its verdict: tests/test_lb_worker.py).
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == expected
    with server.sessions()() as session:
        assert session.scalar(select(func.count(Submission.id))) == stored

    # The whole set is a reproduction of the entry, and credited to its team.
    reproduction = _final(server, b, HEURISTIC)
    assert reproduction["state"] == "verified" and reproduction["entry"] is None
    assert reproduction["reproduces"] == original["entry"]
    with server.sessions()() as session:
        assert [e.team.name for e in crud.track_entries(session, TRACK)] == ["first", "copier"]
        assert crud.reproduction_counts(session, [original["id"]]) == {original["id"]: 1}


def test_a_teams_own_resubmission_is_no_reproduction_of_its_entry(server: Server) -> None:
    a, b = server.team("first"), server.team("second")
    original = _final(server, a, HEURISTIC)
    # The same traces under another description: new bytes, the team's own traces again.
    described = members(HEURISTIC)
    described[SUBMISSION] = described[SUBMISSION].replace(
        b"reference baseline heuristic", b"the heuristic, run again"
    )
    again = _final(server, a, archive(described))
    assert again["state"] == "verified" and again["reproduces"] == original["entry"]
    other = _final(server, b, HEURISTIC)
    assert other["reproduces"] == original["entry"]
    with server.sessions()() as session:
        assert crud.reproduction_counts(session, [original["id"]]) == {original["id"]: 1}
        assert [s.id for s in crud.reproductions(session, original["id"])] == [other["id"]]
        team_a = crud.team_by_name(session, "first").id
        sha256 = session.get(Submission, original["id"]).bundle_sha256
        assert crud.same_upload(session, team_a, sha256).id == original["id"]
        assert count(session, Submission) == 3
