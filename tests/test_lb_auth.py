"""Team tokens and the admin CLI, on SQLite and on a real PostgreSQL: a token is shown once and
stored as its sha256 only; the bearer dependency answers 401 for a missing, wrong or revoked
token; ``python -m leaderboard.tools.admin`` creates teams, issues, revokes and lists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient
from helpers.lb_db import DATABASES, database_url, fresh_engine
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.server import auth, crud
from leaderboard.server.db.models import Token
from leaderboard.server.db.session import make_engine, make_sessions, upgrade
from leaderboard.tools import admin

TOKEN = re.compile(r"lb_[A-Za-z0-9_-]{43}")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(params=DATABASES)
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    with fresh_engine(request.param, request, tmp_path) as engine:
        upgrade(engine)
        yield make_sessions(engine)


def test_a_token_is_random_and_only_its_sha256_is_stored(sessions: sessionmaker) -> None:
    with sessions() as s:
        team = crud.create_team(s, "a")
        tokens = [auth.issue_token(s, team.id) for _ in range(2)]
    assert all(TOKEN.fullmatch(t) for t in tokens) and tokens[0] != tokens[1]
    with sessions() as s:
        rows = s.execute(select(Token.__table__)).all()
    assert [r.sha256 for r in rows] == [auth.token_sha256(t) for t in tokens]
    stored = repr(rows)
    assert not any(t in stored or t[3:] in stored for t in tokens)


def test_a_token_authenticates_its_team_until_revoked(sessions: sessionmaker) -> None:
    with sessions() as s:
        a, b = crud.create_team(s, "a"), crud.create_team(s, "b")
        token_a, token_b = auth.issue_token(s, a.id), auth.issue_token(s, b.id)
        assert auth.authenticate(s, token_a) == auth.TeamIdentity(a.id, "a")
        assert auth.authenticate(s, token_b) == auth.TeamIdentity(b.id, "b")
        assert auth.authenticate(s, token_a[:-1]) is None
        assert auth.authenticate(s, auth.token_sha256(token_a)) is None
        assert crud.revoke_tokens(s, a.id) == 1
        assert auth.authenticate(s, token_a) is None
        assert auth.authenticate(s, token_b) == auth.TeamIdentity(b.id, "b")
        assert crud.revoke_tokens(s, a.id) == 0
        fresh = auth.issue_token(s, a.id)
        assert auth.authenticate(s, fresh) == auth.TeamIdentity(a.id, "a")


def test_the_bearer_dependency_answers_401_unless_the_token_is_valid(
    sessions: sessionmaker,
) -> None:
    app = FastAPI()
    app.state.sessions = sessions

    @app.get("/whoami")
    def whoami(team: Annotated[auth.TeamIdentity, Depends(auth.current_team)]) -> dict:
        return {"id": team.id, "name": team.name}

    with sessions() as s:
        team = crud.create_team(s, "<b>a</b>")
        token = auth.issue_token(s, team.id)
    client = TestClient(app)
    ok = client.get("/whoami", headers={"Authorization": f"Bearer {token}"})
    assert (ok.status_code, ok.json()) == (200, {"id": team.id, "name": "<b>a</b>"})
    for headers in [{}, {"Authorization": f"Basic {token}"}, {"Authorization": "Bearer"},
                    {"Authorization": f"Bearer {token}x"}, {"Authorization": token}]:  # fmt: skip
        answer = client.get("/whoami", headers=headers)
        assert answer.status_code == 401, headers
        assert answer.headers["www-authenticate"] == "Bearer"
        assert "valid team token" in answer.json()["detail"]
    with sessions() as s:
        crud.revoke_tokens(s, team.id)
    assert client.get("/whoami", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def _admin(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, list[str], str]:
    code = admin.main(list(argv))
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


@pytest.mark.parametrize("kind", DATABASES)
def test_the_admin_cli_creates_teams_and_issues_revokes_and_lists_tokens(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    options = [f"data_dir={tmp_path / 'data'}"]
    if kind == "postgresql":
        options.append(f"db_url={database_url(kind, request, tmp_path)}")
    name = "<script>alert(1)</script> a=b"
    code, lines, _ = _admin(capsys, "create-team", name, *options)
    assert code == 0 and TOKEN.fullmatch(lines[-1]) and name in lines[0]
    first = lines[-1]
    code, lines, _ = _admin(capsys, "list-teams", *options)
    assert code == 0 and lines[1].split()[:2] == ["1", "1"] and lines[1].endswith(name)

    url = f"sqlite:///{tmp_path / 'data' / 'leaderboard.sqlite3'}"
    engine = make_engine(options[1].removeprefix("db_url=") if kind == "postgresql" else url)

    def team_of(token: str) -> str | None:
        with make_sessions(engine)() as s:
            team = auth.authenticate(s, token)
            return team.name if team else None

    try:
        assert team_of(first) == name
        code, lines, _ = _admin(capsys, "issue-token", name, *options)
        second = lines[-1]
        assert code == 0 and TOKEN.fullmatch(second) and second != first
        assert team_of(second) == name
        code, lines, _ = _admin(capsys, "revoke-token", name, *options)
        assert (code, lines) == (0, [f"revoked 2 token(s) of team {name!r}"])
        assert team_of(first) is None and team_of(second) is None
    finally:
        engine.dispose()
    code, lines, _ = _admin(capsys, "list-teams", *options)
    assert lines[1].split()[:2] == ["1", "0"]

    code, _, err = _admin(capsys, "create-team", name, *options)
    assert code == 1 and "is taken" in err
    code, _, err = _admin(capsys, "revoke-token", "nobody", *options)
    assert code == 1 and "no team named 'nobody'" in err


def test_the_admin_cli_refuses_bad_commands_and_options(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data = f"data_dir={tmp_path}"
    assert _admin(capsys, "make-team", "x", data)[0] == 2
    code, _, err = _admin(capsys, "create-team")
    assert code == 2 and "create-team needs a team name" in err
    code, _, err = _admin(capsys, "create-team", "", data)
    assert code == 1 and "must not be empty" in err
    with pytest.raises(SystemExit) as exit_:
        admin.main(["list-teams", data, "colour=blue"])
    assert exit_.value.code == 2 and "colour: unknown option" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        admin.main(["--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "create-team NAME" in out and "db_url=" in out


def test_python_m_leaderboard_admin_prints_the_token_alone_on_its_last_line(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "leaderboard.tools.admin",
            "create-team",
            "team a",
            f"data_dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and TOKEN.fullmatch(lines[-1])
    assert (tmp_path / "secret").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "leaderboard.sqlite3").exists()
