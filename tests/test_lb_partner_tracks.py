"""The cross-play and human-in-the-loop tracks: the server draws each episode's partner from its
own population with the challenge, the runner (or a person in the play session) plays the
focal seat beside that partner, and verification re-runs the assigned partner on its agents: a
genuine submission is verified, one whose partner seats were played by anything else, or whose
members were edited, is rejected naming the agent, the tick and the two actions."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers.lb_bundles import edit, reseal, run_suite
from sqlalchemy.orm import Session, sessionmaker

from baselines.heuristic.team import HeuristicTeam
from benchmark.play.session import PlaySession
from benchmark.results.challenge import Challenge, load_challenge
from leaderboard.client.pack import pack_run
from leaderboard.core.bundle import read_bundle
from leaderboard.core.challenges import issue_challenge, partner_pool
from leaderboard.core.verify import Verdict, verify_bundle
from leaderboard.server import crud
from leaderboard.server.db import models
from leaderboard.server.db.session import open_database
from leaderboard.server.services import challenges, uploads, verification
from leaderboard.server.settings import Settings

SECRET = b"s" * 32
NOW = datetime(2030, 1, 1, tzinfo=UTC)
# Played in place of the assigned partner, under its label: another team, and the heuristic with
# an option no member of the population has.
IMPOSTORS = {
    "random": {"baseline": "random", "kwargs": {"seed": 7}},
    "heuristic-slow3": {"baseline": "heuristic", "kwargs": {"slow": 3}},
}


class Board:
    """A data directory, its SQLite database and one team, as the server has them."""

    def __init__(self, tmp_path: Path, **options: object) -> None:
        self.settings = Settings(data_dir=tmp_path, secret=SECRET, challenge_scenes=1, **options)
        self.sessions: sessionmaker[Session] = open_database(self.settings.database_url)
        uploads.prepare_storage(self.settings)
        with self.sessions() as session:
            self.team = crud.create_team(session, "team-a")

    def issue(self, suite: str) -> Challenge:
        with self.sessions() as session:
            return challenges.issue(session, self.team.id, "team-a", suite, self.settings)


def _issue(suite: str) -> Challenge:
    """A challenge drawn as the server draws it, with a fixed id (the same in every run)."""
    return issue_challenge(
        SECRET, "team-a", suite, now=NOW, lifetime=timedelta(days=3650), scenes=1,
        challenge_id=f"ch-{suite}", partners=partner_pool("heldout"),
    )  # fmt: skip


def _write(challenge: Challenge, path: Path, impostor: dict | None = None) -> Path:
    """The challenge file; with ``impostor`` every partner is played by that team instead,
    under the assigned label."""
    data = challenge.to_json()
    if impostor is not None:
        for episode in data["episodes"]:
            episode["partner"] = {"label": episode["partner"]["label"], **impostor}
    path.write_text(json.dumps(data))
    return path


def _crossplay_bundle(tmp_path: Path, challenge: Challenge, impostor: dict | None = None) -> bytes:
    """The heuristic's run of ``challenge`` (as the file it got says), packed."""
    path = _write(challenge, tmp_path / "challenge.json", impostor)
    run_suite(
        tmp_path / "run", "suite=crossplay", f"challenge={path}", "baseline=heuristic",
        "reference=false",
    )  # fmt: skip
    return pack_run(tmp_path / "run", tmp_path / "sub.tar.gz", {"method": "h"}).read_bytes()


def _verify(data: bytes, challenge: Challenge) -> Verdict:
    return verify_bundle(read_bundle(io.BytesIO(data)), challenge)


@pytest.fixture(scope="module")
def crossplay(tmp_path_factory: pytest.TempPathFactory) -> tuple[Challenge, bytes]:
    challenge = _issue("crossplay")
    return challenge, _crossplay_bundle(tmp_path_factory.mktemp("crossplay"), challenge)


# --- issuing --------------------------------------------------------------------------------


def test_a_crossplay_challenge_assigns_each_episode_a_partner_the_server_can_rerun(
    tmp_path: Path,
) -> None:
    board = Board(tmp_path)
    challenge = board.issue("crossplay")
    pool = {p.label: p for p in partner_pool("heldout")}
    assert "policy-tiny" not in pool and {"heuristic", "random"} <= set(pool)
    assert len(challenge.episodes) == 4
    assert all(e.partner == pool[e.partner.label] for e in challenge.episodes)
    assert challenge.to_json()["format"] == 2
    with board.sessions() as session:
        assert crud.as_challenge(session.get(models.Challenge, challenge.id)) == challenge
    test = board.issue("test")  # the test track's challenges keep the old format
    assert test.to_json()["format"] == 1 and all(e.partner is None for e in test.episodes)


def test_a_named_member_the_server_cannot_rerun_refuses_the_challenge(tmp_path: Path) -> None:
    board = Board(tmp_path, partner_labels="heuristic,policy-tiny")
    with pytest.raises(crud.Refused, match="member 'policy-tiny' cannot be re-run") as refused:
        board.issue("crossplay")
    assert refused.value.status == 503 and "policy" in str(refused.value)
    (tmp_path / "silent").mkdir()
    only = Board(tmp_path / "silent", partner_labels="heuristic-silent").issue("human")
    assert {e.partner.member()["kwargs"]["silent"] for e in only.episodes} == {True}


# --- cross-play -----------------------------------------------------------------------------


def test_the_focal_team_plays_beside_each_assigned_partner_and_the_server_verifies_it(
    tmp_path: Path,
) -> None:
    board = Board(tmp_path)
    challenge = board.issue("crossplay")
    data = _crossplay_bundle(tmp_path, challenge)
    bundle = read_bundle(io.BytesIO(data))
    assert {r["key"]: r["members"] for r in bundle.rows} == {
        r["key"]: {"agent_0": "heuristic", "agent_1": r["partner"]} for r in bundle.rows
    }
    assigned = {(e.task, e.seed): e.partner.label for e in challenge.episodes}
    assert {(r["task"], r["seed"]): r["partner"] for r in bundle.rows} == assigned
    accepted = uploads.accept(io.BytesIO(data), board.team.id, board.settings, board.sessions)
    assert verification.verify_next(board.settings, board.sessions) == accepted.submission.id
    with board.sessions() as session:
        submission = crud.get_submission(session, accepted.submission.id)
        assert (submission.state, submission.reason) == ("verified", "")


@pytest.mark.parametrize("impostor", IMPOSTORS.values(), ids=IMPOSTORS)
def test_partner_seats_played_by_another_team_are_rejected_naming_agent_tick_and_actions(
    tmp_path: Path, crossplay: tuple[Challenge, bytes], impostor: dict
) -> None:
    challenge, _ = crossplay
    verdict = _verify(_crossplay_bundle(tmp_path, challenge, impostor), challenge)
    assert not verdict.ok and not verdict.reasons
    for check in verdict.episodes:  # every episode's members say the assigned partner
        assert not check.ok, check.key
        (reason,) = check.reasons
        label = next(e.partner.label for e in challenge.episodes if f"/s{e.seed}/" in check.key)
        assert reason.startswith("agent_1: at tick ")
        assert f"the assigned partner {label!r} chooses '" in reason and "the trace has '" in reason


def test_the_genuine_run_verifies_and_edited_members_or_partners_are_rejected(
    crossplay: tuple[Challenge, bytes],
) -> None:
    challenge, data = crossplay
    verdict = _verify(data, challenge)
    assert verdict.ok, verdict.explanation
    first = read_bundle(io.BytesIO(data)).rows[0]
    label = first["partner"]
    other = "heuristic-silent" if label != "heuristic-silent" else "heuristic"

    def members(rows: list[dict], traces: dict) -> None:  # says another member played agent_1
        trace = traces[first["key"]]
        trace["members"]["agent_1"] = rows[0]["members"]["agent_1"] = other
        reseal(trace, rows[0])

    forged = _verify(edit(data, members), challenge)
    assert forged.explanation == [
        f"{first['key']}: members.agent_1: {other!r} != {label!r} (the challenge's partner)"
    ]

    def partner(rows: list[dict], traces: dict) -> None:
        rows[0]["partner"] = other

    forged = _verify(edit(data, partner), challenge)
    assert forged.explanation == [
        f"{first['key']}: partner: {other!r} != {label!r} (the challenge's assignment)"
    ]


# --- human in the loop ----------------------------------------------------------------------


def _play(session: PlaySession) -> None:
    """A scripted person on agent_0: the heuristic's choices, posted through the forms."""
    person = HeuristicTeam()
    person.reset(["agent_0"], session.info)
    while not session.over:
        line = person.act({"agent_0": session.observation("agent_0")})["agent_0"]
        action, _, say = line.partition(" | say ")
        to, _, text = say.partition(":")
        session.post("agent_0", {"tick": str(session.tick), "action": action, "to": to.strip(),
                                 "message": text})  # fmt: skip


def _human_bundle(tmp_path: Path, challenge: Challenge, impostor: dict | None = None) -> bytes:
    tmp_path.mkdir()
    path = _write(challenge, tmp_path / "challenge.json", impostor)
    out = tmp_path / "played"
    for k in range(len(challenge.episodes)):
        _play(PlaySession.from_challenge(path, k, out_dir=out))
    with pytest.raises(ValueError, match=r"episode 0 \(.*\) was played into"):
        PlaySession.from_challenge(path, 0, out_dir=out)
    return pack_run(out, tmp_path / "human.tar.gz", {"method": "people"}).read_bytes()


def test_a_person_beside_the_assigned_partners_verifies_and_a_deviating_partner_does_not(
    tmp_path: Path,
) -> None:
    challenge = _issue("human")
    assert [e.scene for e in challenge.episodes] == ["FloorPlan26", "FloorPlan426"]  # pinned
    data = _human_bundle(tmp_path / "genuine", challenge)
    bundle = read_bundle(io.BytesIO(data))
    assert bundle.manifest["baseline"] == "human" and len(bundle.rows) == 2
    assert all(r["members"] == {"agent_0": "human", "agent_1": r["partner"]} for r in bundle.rows)
    verdict = _verify(data, challenge)
    assert verdict.ok, verdict.explanation

    forged = _verify(_human_bundle(tmp_path / "forged", challenge, IMPOSTORS["random"]), challenge)
    assert not forged.ok
    assert all(c.reasons[0].startswith("agent_1: at tick ") for c in forged.episodes)

    def not_human(rows: list[dict], traces: dict) -> None:  # the bot's own name on the seat
        for row in rows:
            traces[row["key"]]["members"]["agent_0"] = row["members"]["agent_0"] = "heuristic"
            reseal(traces[row["key"]], row)

    claimed = _verify(edit(data, not_human), challenge)
    assert not claimed.ok
    assert "members.agent_0: 'heuristic' != 'human' (agent_0's player)" in claimed.explanation[0]


def test_the_runner_refuses_a_suite_people_play_and_play_refuses_a_team_suite(
    tmp_path: Path,
) -> None:
    human = _write(_issue("human"), tmp_path / "human.json")
    with pytest.raises(ValueError, match="people play agent_0 of its episodes"):
        run_suite(tmp_path / "run", "suite=human", f"challenge={human}", "baseline=heuristic")
    cross = _write(_issue("crossplay"), tmp_path / "cross.json")
    with pytest.raises(ValueError, match="which people do not play"):
        PlaySession.from_challenge(cross)
    with pytest.raises(ValueError, match="episode: 2 is not one of the challenge's episodes"):
        PlaySession.from_challenge(human, 2)
    assert load_challenge(human).episodes[0].partner is not None
