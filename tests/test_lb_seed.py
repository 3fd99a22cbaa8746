"""``python -m leaderboard.seed`` (``make leaderboard``): a local board that starts with the
reference baselines on it, verified by replay through the HTTP API like any submission."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx

from benchmark.reproduce.spec import load_table, table_names
from leaderboard.seed import reference_bundles
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


def _expected_entries() -> dict[str, int]:
    """Entries per track the committed paper bundles make: one per method (the run's label) and
    track; a second bundle of the same episodes by the same method is a reproduction."""
    labels = {r.id: r.label for name in table_names("all") for r in load_table(name).runs}
    methods: dict[str, set[str]] = {}
    for path in reference_bundles():
        run_id, rest = path.name.split(".", 1)
        methods.setdefault(rest.removesuffix(".tar.gz"), set()).add(labels[run_id])
    return {track: len(m) for track, m in methods.items()}


def test_the_seeded_board_shows_every_paper_bundle_verified(tmp_path: Path) -> None:
    expected = _expected_entries()
    assert len(reference_bundles()) >= 20
    port = free_port()
    process, lines = _seed(tmp_path / "data", port)
    try:
        verdicts = [line for line in lines if ".tar.gz: " in line]
        assert len(verdicts) == len(reference_bundles()), lines
        assert all(v.split(": ", 1)[1].startswith("verified") for v in verdicts), lines
        assert lines[-1].startswith(f"leaderboard: http://127.0.0.1:{port}/")
        tracks = httpx.get(f"http://127.0.0.1:{port}/api/tracks").json()["suite_versions"]
        entries = {t["key"]: t["entries"] for group in tracks for t in group["tracks"]}
        assert {k: v for k, v in entries.items() if v} == expected
        page = httpx.get(f"http://127.0.0.1:{port}/tracks/paper-v1.n2.comm-on.partial.skill").text
        assert "heuristic" in page and "random" in page
    finally:
        _stop(process)
    # A restart on the same data submits nothing again.
    process, lines = _seed(tmp_path / "data", port)
    try:
        assert "with 0 reference bundle(s)" in lines[0], lines
        tracks = httpx.get(f"http://127.0.0.1:{port}/api/tracks").json()["suite_versions"]
        assert sum(t["entries"] for group in tracks for t in group["tracks"]) == sum(
            expected.values()
        )
    finally:
        _stop(process)
