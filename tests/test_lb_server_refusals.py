"""Bad input sent to the real server (uvicorn in a subprocess, SQLite): every refusal is a
clear 4xx naming what was wrong, and nothing is stored — no submission row, no bundle file."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from leaderboard.server.db.models import Submission
from tests.helpers.lb_bundles import archive, edit, members
from tests.helpers.lb_server import Server

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
ORACLE = (SEED / "oracle-smoke-v1.tar.gz").read_bytes()
RANDOM = (SEED / "random-smoke-v1.tar.gz").read_bytes()
LIMIT_MB = 0.04  # between the oracle bundle (9 kB) and the random one (49 kB)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # workers=1: the server must still refuse all of this before any verification.
    with Server(tmp_path_factory.mktemp("lb") / "data", max_upload_mb=LIMIT_MB, workers=1) as board:
        yield board


@pytest.fixture(scope="module")
def token(server: Server) -> str:
    return server.team("refusals")


def _nothing_stored(server: Server) -> None:
    with server.sessions()() as session:
        assert session.scalar(select(func.count(Submission.id))) == 0
    assert [p.name for p in (server.data_dir / "bundles").iterdir()] == []


def _tar(info: tarfile.TarInfo, data: bytes = b"") -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        tar.addfile(info, io.BytesIO(data) if data else None)
    return raw.getvalue()


def _named(name: str) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = 2
    return _tar(info, b"{}")


def _symlink() -> bytes:
    info = tarfile.TarInfo("manifest.json")
    info.type = tarfile.SYMTYPE
    info.linkname = "/etc/passwd"
    return _tar(info)


def _gzip_bomb() -> bytes:
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        info = tarfile.TarInfo("episodes.jsonl")
        info.size = 8 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    return raw.getvalue()


def _member(name: str, blob: bytes) -> bytes:
    contents = members(ORACLE)
    contents[name] = blob
    return archive(contents)


def _manifest_without(field: str) -> bytes:
    contents = members(ORACLE)
    manifest = json.loads(contents["manifest.json"])
    del manifest["track"][field]
    contents["manifest.json"] = json.dumps(manifest).encode()
    return archive(contents)


def _other_track() -> bytes:
    contents = members(ORACLE)
    manifest = json.loads(contents["manifest.json"])
    manifest["track"]["comm"] = False
    contents["manifest.json"] = json.dumps(manifest).encode()
    return archive(contents)


def _duplicated(rows: list[dict], traces: dict) -> None:
    rows.append(dict(rows[0]))


def _missing(rows: list[dict], traces: dict) -> None:
    run = next(i for i, r in enumerate(rows) if not r["reference"])
    del rows[run]


def _seed_swapped(rows: list[dict], traces: dict) -> None:
    # The suite publishes seed 0 for every task: a row claiming seed 1 is another episode.
    run = next(r for r in rows if not r["reference"])
    run["seed"] = 1


CASES: dict[str, tuple[Callable[[], bytes], int, str]] = {
    "oversized bundle": (lambda: RANDOM, 413, "archive: larger than 41943 bytes"),
    "oversized stream": (lambda: bytes(300_000), 413, "larger than the limit of 41943 bytes"),
    "gzip bomb": (_gzip_bomb, 413, "times its size"),
    "zip archive": (lambda: b"PK\x03\x04" + bytes(200), 400, "not a gzip'd tar archive"),
    "dot-dot member": (lambda: _named("../manifest.json"), 400, "'..' in the path"),
    "absolute member": (lambda: _named("/etc/passwd"), 400, "absolute path"),
    "symlink member": (_symlink, 400, "a symbolic link"),
    "unexpected member": (lambda: _named("notes.txt"), 400, "unexpected name"),
    "malformed JSON": (
        lambda: _member("episodes.jsonl", b"{not json\n"),
        422,
        "episodes.jsonl line 1",
    ),
    "missing field": (lambda: _manifest_without("n_agents"), 422, "manifest.track"),
    "duplicated episode": (lambda: edit(ORACLE, _duplicated), 422, "listed twice"),
    "missing episode": (lambda: edit(ORACLE, _missing), 422, "missing episode"),
    "seed swapped": (lambda: edit(ORACLE, _seed_swapped), 422, "not an episode of this track"),
    "trace of another track": (_other_track, 422, "not an episode of this track"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_upload_is_refused_with_its_reason_and_nothing_is_stored(
    server: Server, token: str, case: str
) -> None:
    build, status, fragment = CASES[case]
    response = server.upload(token, build())
    assert response.status_code == status, response.text
    body = response.json()
    assert fragment in body["detail"], body
    _nothing_stored(server)


def test_a_missing_field_is_named_by_its_path(server: Server, token: str) -> None:
    body = server.upload(token, _manifest_without("n_agents")).json()
    assert body["field"] == "manifest.track.n_agents"


def test_a_form_without_the_file_field_is_refused(server: Server, token: str) -> None:
    response = httpx.post(
        f"{server.url}/api/submissions",
        headers={"Authorization": f"Bearer {token}"},
        files={"bundle": ("sub.tar.gz", ORACLE, "application/gzip")},
    )
    assert response.status_code == 422
    assert "file: missing" in response.json()["detail"]
    _nothing_stored(server)


def test_a_wrong_missing_or_revoked_token_is_401(server: Server) -> None:
    revoked = server.team("revoked-team")
    server.admin("revoke-token", "revoked-team")
    for headers in (
        {"Authorization": "Bearer lb_wrong"},
        {},
        {"Authorization": f"Bearer {revoked}"},
    ):
        response = httpx.post(
            f"{server.url}/api/submissions",
            headers=headers,
            files={"file": ("sub.tar.gz", ORACLE, "application/gzip")},
        )
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"] == "Bearer"
        assert "team token" in response.json()["detail"]
    _nothing_stored(server)


def test_a_challenge_of_another_team_is_refused(server: Server, token: str) -> None:
    other = server.team("challenge-owner")
    issued = httpx.post(
        f"{server.url}/api/challenges",
        headers={"Authorization": f"Bearer {other}"},
        json={"suite": "test"},
        timeout=120,
    )
    assert issued.status_code == 201, issued.text
    contents = members(ORACLE)
    manifest = json.loads(contents["manifest.json"])
    manifest["challenge"] = issued.json()["id"]
    contents["manifest.json"] = json.dumps(manifest).encode()
    response = server.upload(token, archive(contents))
    assert response.status_code == 403
    assert "issued to another team" in response.json()["detail"]
    _nothing_stored(server)


def test_a_challenge_of_a_published_suite_is_refused(server: Server, token: str) -> None:
    response = httpx.post(
        f"{server.url}/api/challenges",
        headers={"Authorization": f"Bearer {token}"},
        json={"suite": "smoke"},
    )
    assert response.status_code == 422
    assert "not a hidden-seed suite" in response.json()["detail"]
