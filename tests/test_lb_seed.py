"""``python -m leaderboard.seed`` (``make leaderboard``): a local board that starts with the
reference baselines on it, verified by replay through the HTTP API like any submission."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.helpers.lb_server import free_port

START_S = 300.0


def _seed(data_dir: Path, port: int) -> tuple[subprocess.Popen[str], list[str]]:
    """Start the seeding server; its lines up to the one with the URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "leaderboard.seed", f"data_dir={data_dir}", f"port={port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if line.startswith("leaderboard: http"):
            return process, lines
    process.kill()
    raise AssertionError("the seeded board never printed its URL:\n" + "\n".join(lines))


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    process.wait(60)


def test_the_seeded_board_shows_the_four_reference_baselines_verified(tmp_path: Path) -> None:
    port = free_port()
    process, lines = _seed(tmp_path / "data", port)
    try:
        verdicts = [line for line in lines if ".tar.gz: " in line]
        assert len(verdicts) == 4 and all(": verified track " in v for v in verdicts), lines
        assert lines[-1].startswith(f"leaderboard: http://127.0.0.1:{port}/")
        tracks = httpx.get(f"http://127.0.0.1:{port}/api/tracks").json()["suite_versions"]
        entries = {t["key"]: t["entries"] for group in tracks for t in group["tracks"]}
        assert entries == {
            "smoke-v1.n2.comm-on.full.skill": 1,  # the oracle sees everything
            "smoke-v1.n2.comm-on.partial.skill": 3,  # heuristic, random, llm_planner
        }
        assert "heuristic" in httpx.get(f"http://127.0.0.1:{port}/tracks/{max(entries)}").text
    finally:
        _stop(process)
    # A restart on the same data submits nothing again.
    process, lines = _seed(tmp_path / "data", port)
    try:
        assert "with 0 reference bundle(s)" in lines[0], lines
        tracks = httpx.get(f"http://127.0.0.1:{port}/api/tracks").json()["suite_versions"]
        assert sum(t["entries"] for group in tracks for t in group["tracks"]) == 4
    finally:
        _stop(process)
