"""An on-disk response cache in SQLite, keyed by model, prompt and sampling parameters.

Safe for several processes (Ray workers) at once: WAL journaling and a busy timeout. A corrupt
cache file is moved aside (``<name>.corrupt-<n>``) and a fresh one started, never a crash.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any


def cache_key(model: str, payload: Any, sampling: dict) -> str:
    body = json.dumps({"model": model, "payload": payload, "sampling": sampling}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


class ResponseCache:
    """Key -> JSON value store."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        try:
            self._connect().execute("SELECT count(*) FROM responses").fetchone()
        except sqlite3.DatabaseError:
            self._quarantine()

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

    def _quarantine(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
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
