"""The real leaderboard server for tests: ``python -m leaderboard.server.serve`` in a subprocess
on a free loopback port, on SQLite (a file in its data directory) or a PostgreSQL database, and
the admin CLI run the way a user runs it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.server.db.session import open_database

START_TIMEOUT_S = 90.0
FINAL = ("verified", "rejected")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A leaderboard server process; ``options`` are extra ``key=value`` settings. As a
    context manager it is started on entry and stopped on exit."""

    def __init__(self, data_dir: Path, db_url: str = "", **options: Any) -> None:
        self.data_dir = data_dir
        self.db_url = db_url
        self.options = options
        self.port = free_port()
        self.log = data_dir.parent / f"{data_dir.name}-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _settings(self) -> list[str]:
        out = [f"data_dir={self.data_dir}"]
        if self.db_url:
            out.append(f"db_url={self.db_url}")
        return out

    def start(self) -> Server:
        args = [f"port={self.port}", *self._settings()]
        args += [f"{k}={v}" for k, v in self.options.items()]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "leaderboard.server.serve", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited ({self.process.returncode}):\n{self.logs()}")
            try:
                if httpx.get(f"{self.url}/api/openapi.json", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server did not answer in {START_TIMEOUT_S} s:\n{self.logs()}")

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL the server and its worker processes (its whole process group)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        # Worker processes left behind by a crash must not outlive the test.
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def admin(self, *args: str) -> str:
        """Run ``python -m leaderboard.tools.admin ARGS`` on this server's data; its stdout."""
        done = subprocess.run(
            [sys.executable, "-m", "leaderboard.tools.admin", *args, *self._settings()],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            raise RuntimeError(f"admin {args} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    def team(self, name: str) -> str:
        """Create a team; its token (the last line the admin CLI prints)."""
        return self.admin("create-team", name).strip().splitlines()[-1]

    def sessions(self) -> sessionmaker[Session]:
        """Sessions on the server's database, read directly (what is stored, not shown)."""
        return open_database(self.db_url or f"sqlite:///{self.data_dir / 'leaderboard.sqlite3'}")

    def upload(self, token: str, data: bytes, name: str = "sub.tar.gz") -> httpx.Response:
        return httpx.post(
            f"{self.url}/api/submissions",
            headers={"Authorization": f"Bearer {token}"},
            files={"file": (name, data, "application/gzip")},
            timeout=60,
        )

    def wait(self, submission: int, timeout: float = 180.0) -> dict[str, Any]:
        """Poll a submission until it is verified or rejected; its final state."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = httpx.get(f"{self.url}/api/submissions/{submission}", timeout=30).json()
            if state["state"] in FINAL:
                return state
            time.sleep(0.2)
        raise TimeoutError(f"submission {submission} not final after {timeout} s:\n{self.logs()}")
