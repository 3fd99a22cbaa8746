"""Hostile uploads sent to the real server (uvicorn in a subprocess) on SQLite and PostgreSQL:
each is refused at once with a 4xx naming the file or field, nothing is stored, and the server
goes on answering. Then what the server keeps of an accepted upload, and a team's own
resubmission."""

from __future__ import annotations

import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from leaderboard.core.bundle import ROW_CHECKED_FIELDS, ROW_FIELDS, read_bundle, stored_form
from leaderboard.server.db.models import Submission, Team
from leaderboard.tools.attacks import ATTACKS, with_submission
from tests.helpers.lb_bundles import archive, members
from tests.helpers.lb_server import Server
from tests.helpers.postgres import PostgresCluster

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
ORACLE = (SEED / "oracle-smoke-v1.tar.gz").read_bytes()
HEURISTIC = (SEED / "heuristic-smoke-v1.tar.gz").read_bytes()
RANDOM = (SEED / "random-smoke-v1.tar.gz").read_bytes()

# attack -> (the field the refusal names, a fragment of its message)
REFUSALS = {
    "yaml alias bomb": ("submission.yaml", "anchors and aliases are not accepted"),
    "yaml deep nesting": ("submission.yaml", "nested more than 8 levels deep"),
    "huge integer": ("submission.yaml.llm_tokens", "from 0 to 1e+15, got an integer of 22 digits"),
    "huge parameter count": ("submission.yaml.parameters", "from 0 to 1e+13"),
    "huge wall time": ("submission.yaml.wall_time_s", "from 0 to 1e+08, got 1e+308"),
    "spoofed method": ("submission.yaml.method", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    "sparse members": ("member 'traces/sparse-0.json'", "a sparse file"),
    "json expansion": ("archive", "(max_json_values)"),
    "unknown row field": ("episodes.jsonl line 1: field 'notes'", "unknown field(s) 'notes'"),
    "duplicate final": ("traces/", "the key 'final' appears twice in one object"),
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres: PostgresCluster,
) -> Iterator[Server]:
    db_url = ""
    if request.param == "postgresql":
        db_url = postgres.create_database("attacks")
    # One verification worker, as the board was attacked.
    with Server(tmp_path_factory.mktemp("lb") / "data", db_url=db_url, workers=1) as board:
        yield board


@pytest.fixture(scope="module")
def token(server: Server) -> str:
    return server.team("attacker")


def _submissions(server: Server) -> int:
    with server.sessions()() as session:
        return session.scalar(select(func.count(Submission.id)))


def test_every_attack_is_listed_with_its_refusal() -> None:
    assert sorted(REFUSALS) == sorted(ATTACKS)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_hostile_upload_is_refused_at_once_naming_what_is_wrong(
    server: Server, token: str, attack: str
) -> None:
    build, status = ATTACKS[attack]
    field, fragment = REFUSALS[attack]
    before = _submissions(server)
    files = sorted(p.name for p in (server.data_dir / "bundles").iterdir())
    response = server.upload(token, build(ORACLE))
    assert response.status_code == status, response.text
    body = response.json()
    assert body["field"].startswith(field), body
    assert fragment in body["detail"], body
    assert len(body["detail"]) < 1000, "a refusal quotes a bounded part of the value"
    assert _submissions(server) == before
    assert sorted(p.name for p in (server.data_dir / "bundles").iterdir()) == files
    # The server goes on answering (it used to stall on the alias bomb for half a minute).
    assert httpx.get(f"{server.url}/api/tracks", timeout=10).status_code == 200


def test_the_server_keeps_only_what_it_verifies(server: Server) -> None:
    token = server.team("keeper")
    accepted = server.upload(token, ORACLE)
    assert accepted.status_code == 202, accepted.text
    state = server.wait(accepted.json()["id"])
    assert state["state"] == "verified", state
    uploaded = read_bundle(io.BytesIO(ORACLE))
    assert "code_version" in uploaded.manifest and "wall_s" in uploaded.rows[0]
    with server.sessions()() as session:
        stored_path = server.data_dir / session.get(Submission, state["id"]).bundle_path
    stored = stored_path.read_bytes()
    assert stored == stored_form(uploaded)
    kept = read_bundle(io.BytesIO(stored))
    assert set(kept.manifest) == {
        "format",
        "suite",
        "suite_version",
        "track",
        "challenge",
        "baseline",
        "members",
    }
    assert {name for row in kept.rows for name in row} <= {*ROW_FIELDS, *ROW_CHECKED_FIELDS}
    assert kept.traces == uploaded.traces and kept.submission == uploaded.submission
    download = httpx.get(f"{server.url}/api/entries/{state['entry']}/bundle", timeout=30)
    assert download.status_code == 200 and download.content == stored


def _reproductions(server: Server, track: str, entry: int) -> int:
    rows = httpx.get(f"{server.url}/api/tracks/{track}", timeout=30).json()["rows"]
    return next(r["reproductions"] for r in rows if r["entry"] == entry)


def test_a_teams_own_resubmission_returns_its_submission_and_is_no_reproduction(
    server: Server,
) -> None:
    owner, other = server.team("resubmitter"), server.team("reproducer")
    first = server.upload(owner, HEURISTIC)
    assert first.status_code == 202, first.text
    original = server.wait(first.json()["id"])
    assert original["state"] == "verified" and original["entry"] is not None, original
    entry, track = original["entry"], original["track"]
    before = _submissions(server)
    files = sorted(p.name for p in (server.data_dir / "bundles").iterdir())

    # The same bundle again: its submission back, nothing stored.
    again = server.upload(owner, HEURISTIC)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == original["id"] and again.json()["state"] == "verified"
    assert _submissions(server) == before
    assert sorted(p.name for p in (server.data_dir / "bundles").iterdir()) == files

    # The same traces with another description: a submission of its own, but the team's own
    # traces are no reproduction of its entry.
    described = with_submission(
        HEURISTIC, "method: heuristic\nllm_tokens: 0\nwall_time_s: 1.0\ndescription: again\n"
    )
    resubmitted = server.wait(server.upload(owner, described).json()["id"])
    assert resubmitted["state"] == "verified" and resubmitted["reproduces"] == entry
    assert _reproductions(server, track, entry) == 0

    # Another team's identical traces are one reproduction, however often it sends them.
    for data in (HEURISTIC, described):
        copy = server.wait(server.upload(other, data).json()["id"])
        assert copy["state"] == "verified" and copy["reproduces"] == entry
    assert _reproductions(server, track, entry) == 1


def test_identical_uploads_sent_at_once_store_one_submission(server: Server) -> None:
    token = server.team("racer")
    files = len(list((server.data_dir / "bundles").iterdir()))
    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: server.upload(token, RANDOM), range(6)))
    assert {a.status_code for a in answers} <= {200, 202}, [a.text for a in answers]
    assert [a.status_code for a in answers].count(202) == 1
    assert len({a.json()["id"] for a in answers}) == 1
    with server.sessions()() as session:
        team = session.scalar(select(Team.id).where(Team.name == "racer"))
        assert (
            session.scalar(select(func.count(Submission.id)).where(Submission.team_id == team)) == 1
        )
    assert len(list((server.data_dir / "bundles").iterdir())) == files + 1


def test_a_duplicate_key_in_the_manifest_is_refused(server: Server, token: str) -> None:
    # Every JSON the server reads refuses repeated keys, not only traces.
    contents = members(ORACLE)
    text = contents["manifest.json"].decode()
    contents["manifest.json"] = ('{"baseline": "someone-else", ' + text.lstrip()[1:]).encode()
    response = server.upload(token, archive(contents, rehash=False))
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "manifest.json"
    assert "'baseline' appears twice" in response.json()["detail"]


def test_a_duplicate_key_in_a_request_body_is_refused(server: Server, token: str) -> None:
    # A last-key-wins reader would draw a challenge of the hidden-seed suite.
    response = httpx.post(
        f"{server.url}/api/challenges",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        content=b'{"suite": "smoke", "suite": "test"}',
        timeout=120,
    )
    assert response.status_code == 422, response.text
    assert "body: the key 'suite' appears twice" in response.json()["detail"]
