"""The client, ``python -m leaderboard.client.submit``, against the real server: a run directory is
packed, uploaded and waited for; refusals and network errors are one line each, and the exit
status is 0 only for a verified submission."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.lb_bundles import edit, run_suite
from tests.helpers.lb_server import Server, free_port

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    board = Server(tmp_path_factory.mktemp("lb") / "data", workers=2).start()
    try:
        yield board
    finally:
        board.stop()


def _submit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "leaderboard.client.submit", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _token_file(server: Server, team: str, path: Path) -> Path:
    path.write_text(server.team(team) + "\n")
    return path


def test_a_run_directory_is_packed_submitted_and_ranked(server: Server, tmp_path: Path) -> None:
    run = run_suite(tmp_path / "run", "suite=smoke", "baseline=oracle")["root"]
    token = _token_file(server, "client-team", tmp_path / "team.token")
    done = _submit(str(run), "--server", server.url, "--token-file", str(token))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: entry" in done.stdout and "rank 1" in done.stdout
    # The same bundle again from the same team: its submission, nothing stored anew.
    again = _submit(str(run), "--server", server.url, "--token-file", str(token))
    assert again.returncode == 0 and "uploaded before as submission" in again.stdout
    # The same traces from another team: a reproduction of that entry, still a success.
    other = _token_file(server, "second-team", tmp_path / "other.token")
    copy = _submit(str(run), "--server", server.url, "--token-file", str(other))
    assert copy.returncode == 0 and "a reproduction of entry" in copy.stdout


def test_a_rejected_bundle_prints_the_servers_reason_and_exits_1(
    server: Server, tmp_path: Path
) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        rows[0]["TR"] = 0.5

    forged = tmp_path / "forged.tar.gz"
    forged.write_bytes(edit((SEED / "oracle-smoke-v1.tar.gz").read_bytes(), change))
    token = _token_file(server, "client-forger", tmp_path / "team.token")
    done = _submit(str(forged), "--server", server.url, "--token-file", str(token))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "rejected" in done.stdout and "TR: 0.5 != " in done.stdout


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        ("bad token", "the server refused the submission (401)"),
        ("no server", "cannot reach"),
        ("no token file", "token"),
    ],
)
def test_errors_are_one_line_without_a_traceback(
    server: Server, tmp_path: Path, case: str, fragment: str
) -> None:
    token = tmp_path / "team.token"
    token.write_text("lb_not_a_token\n")
    url = server.url
    if case == "no server":
        url = f"http://127.0.0.1:{free_port()}"
    if case == "no token file":
        token = tmp_path / "missing.token"
    bundle = SEED / "oracle-smoke-v1.tar.gz"
    done = _submit(str(bundle), "--server", url, "--token-file", str(token))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], done.stderr
    assert "Traceback" not in done.stderr
