"""``python -m leaderboard.tools.seed`` (``make leaderboard``): a local board that starts with the
reference baselines on it, verified by replay through the HTTP API like any submission.

The seeding of three small paper bundles runs in ``make test``; seeding all of them (a few
minutes on 2 cores, each replayed by the server) is marked slow. Every committed bundle is
replayed in ``make test`` anyway (tests/test_paper_reference.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from benchmark.reproduce.spec import load_table, table_names
from leaderboard.tools.seed import reference_bundles
from tests.helpers.lb_server import free_port

START_S = 300.0


SMALL = (  # three of the smallest committed bundles, two methods on one track
    "scaling-heuristic.scaling-v1.n1.comm-on.partial.skill.tar.gz",
    "scaling-oracle.scaling-v1.n1.comm-on.full.skill.tar.gz",
    "scaling-oracle.scaling-v1.n2.comm-on.full.skill.tar.gz",
)


def _seed(
    data_dir: Path, port: int, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[str], list[str]]:
    """Start the seeding server; its lines up to the one with the URL."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "leaderboard.tools.seed",
            f"data_dir={data_dir}",
            f"port={port}",
            *extra,
        ],
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


def _expected_entries(bundles: list[Path]) -> dict[str, int]:
    """Entries per track the bundles make: one per method (the run's label) and track; a second
    bundle of the same episodes by the same method is a reproduction."""
    labels = {r.id: r.label for name in table_names("all") for r in load_table(name).runs}
    methods: dict[str, set[str]] = {}
    for path in bundles:
        run_id, rest = path.name.split(".", 1)
        methods.setdefault(rest.removesuffix(".tar.gz"), set()).add(labels[run_id])
    return {track: len(m) for track, m in methods.items()}


def _check_seeding(
    tmp_path: Path,
    bundles: list[Path],
    page: str,
    methods: tuple[str, ...],
    extra: tuple[str, ...] = (),
) -> None:
    expected = _expected_entries(bundles)
    port = free_port()
    process, lines = _seed(tmp_path / "data", port, extra)
    try:
        verdicts = [line for line in lines if ".tar.gz: " in line]
        assert len(verdicts) == len(bundles), lines
        assert all(v.split(": ", 1)[1].startswith("verified") for v in verdicts), lines
        assert lines[-1].startswith(f"leaderboard: http://127.0.0.1:{port}/")
        tracks = httpx.get(f"http://127.0.0.1:{port}/api/tracks").json()["suite_versions"]
        entries = {t["key"]: t["entries"] for group in tracks for t in group["tracks"]}
        assert {k: v for k, v in entries.items() if v} == expected
        text = httpx.get(f"http://127.0.0.1:{port}/tracks/{page}").text
        assert all(m in text for m in methods)
    finally:
        _stop(process)
    # A restart on the same data submits nothing again.
    process, lines = _seed(tmp_path / "data", port, extra)
    try:
        assert "with 0 reference bundle(s)" in lines[0], lines
        tracks = httpx.get(f"http://127.0.0.1:{port}/api/tracks").json()["suite_versions"]
        assert sum(t["entries"] for group in tracks for t in group["tracks"]) == sum(
            expected.values()
        )
    finally:
        _stop(process)


def test_a_seeded_board_shows_its_bundles_verified_and_a_restart_adds_nothing(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "bundles"
    folder.mkdir()
    paper = {p.name: p for p in reference_bundles()}
    for name in SMALL:
        (folder / name).write_bytes(paper[name].read_bytes())
    bundles = sorted(folder.glob("*.tar.gz"))
    page = "scaling-v1.n1.comm-on.partial.skill"
    _check_seeding(tmp_path, bundles, page, ("heuristic",), (f"bundles={folder}",))


@pytest.mark.slow
def test_the_seeded_board_shows_every_paper_bundle_verified(tmp_path: Path) -> None:
    assert len(reference_bundles()) >= 20
    page = "paper-v1.n2.comm-on.partial.skill"
    _check_seeding(tmp_path, reference_bundles(), page, ("heuristic", "random"))


def test_a_bundles_folder_without_bundles_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "leaderboard.tools.seed", f"bundles={tmp_path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and f"bundles={tmp_path}: no *.tar.gz bundle" in done.stderr
