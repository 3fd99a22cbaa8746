"""A throwaway PostgreSQL cluster for tests: initdb in a temporary directory, a server on
127.0.0.1 (free port, unix socket in the same directory, no durability), databases on demand.

As root, the PostgreSQL programs run as the ``postgres`` user (``runuser -u postgres --``),
since the server refuses to run as root. Each pytest-xdist worker starts its own cluster.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import psycopg


def find_pg_bin() -> Path:
    """The directory of ``initdb`` and ``pg_ctl``: on PATH, or Debian's versioned directory."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    for directory in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(directory) / "initdb").exists():
            return Path(directory)
    raise FileNotFoundError(
        "PostgreSQL is needed by the leaderboard's database tests but initdb was found neither "
        "on PATH nor in /usr/lib/postgresql/*/bin; install PostgreSQL 15 "
        "(apt-get install postgresql-15)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresCluster:
    """A running cluster; :meth:`create_database` returns a SQLAlchemy URL."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="lb-postgres-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self.running = False
        self._names = itertools.count()
        self._as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as_postgres:
            shutil.chown(self.root, user="postgres")

    def _run(self, *args: str) -> None:
        cmd = [*self._as_postgres, str(self.bin_dir / args[0]), *args[1:]]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{log}"
            )

    def start(self) -> None:
        self._run(
            "initdb",
            *("-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8"),
            *("--no-sync", "--no-instructions"),
        )
        for attempt in range(3):
            self.port = _free_port()
            options = (
                f"-h 127.0.0.1 -p {self.port} -k {self.root} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            )
            try:
                self._run(
                    "pg_ctl",
                    "-D",
                    str(self.data),
                    "-l",
                    str(self.log),
                    "-w",
                    "-o",
                    options,
                    "start",
                )
                self.running = True
                return
            except RuntimeError:
                if attempt == 2:  # the port was taken between choosing and binding it
                    raise

    def admin_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def create_database(self, prefix: str = "test") -> str:
        """A new, empty database; returns its ``postgresql+psycopg://`` URL."""
        name = f"{prefix}_{next(self._names)}"
        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def drop_database(self, url: str) -> None:
        """Drop the database of ``url`` (made by :meth:`create_database`), closing its
        connections."""
        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')

    def stop(self) -> None:
        try:
            if self.running:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
                self.running = False
        finally:
            shutil.rmtree(self.root)
