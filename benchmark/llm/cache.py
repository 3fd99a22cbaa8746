"""An on-disk response cache in SQLite, keyed by model, prompt and sampling parameters.

Safe for several processes (Ray workers) at once: WAL journaling and a busy timeout. A corrupt
cache file is moved aside (``<name>.corrupt-<n>``) and a fresh one started, never a crash. A
file another process holds locked (several processes opening a new cache at once) is waited
for, never taken for a corrupt one: moving it aside would lose that process's entries.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any


def cache_key(model: str, payload: Any, sampling: dict) -> str:
    body = json.dumps({"model": model, "payload": payload, "sampling": sampling}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


LOCKED_RETRIES = 40  # about 30 s of waiting for a cache file another process holds locked


class ResponseCache:
    """Key -> JSON value store."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        for attempt in range(LOCKED_RETRIES + 1):
            try:
                self._connect().execute("SELECT count(*) FROM responses").fetchone()
                return
            except sqlite3.OperationalError:  # locked or busy: another process is at it
                self._close()
                if attempt == LOCKED_RETRIES:
                    raise
                time.sleep(min(1.0, 0.02 * 2**attempt))
            except sqlite3.DatabaseError:  # not a database, or a malformed one
                self._quarantine()
                return

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            self._local.conn = conn
        return conn

    def _close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _quarantine(self) -> None:
        self._close()
        n = 0
        while self.path.with_name(f"{self.path.name}.corrupt-{n}").exists():
            n += 1
        self.path.rename(self.path.with_name(f"{self.path.name}.corrupt-{n}"))
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                side.unlink()
        self._connect()

    def get(self, key: str) -> Any | None:
        row = (
            self._connect().execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        )
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except json.JSONDecodeError:
            return None

    def put(self, key: str, value: Any) -> None:
        self._connect().execute(
            "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, json.dumps(value))
        )

    def __len__(self) -> int:
        return self._connect().execute("SELECT count(*) FROM responses").fetchone()[0]
