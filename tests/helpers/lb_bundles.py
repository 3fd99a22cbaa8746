"""Real runs and bundle surgery for the leaderboard tests: runs come from the real runner, and
bad bundles are derived from the bytes of a packed one."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from rich.console import Console

from benchmark.env import trace_hash
from benchmark.paths import CONFIGS_DIR
from benchmark.runner.app import run
from benchmark.runner.config import register_configs
from leaderboard.core.bundle import MANIFEST, ROWS, tar_bytes, trace_member
from leaderboard.tools.attacks import unpack, with_true_checksums

register_configs()

CHALLENGE_EPISODES = [
    {"task": "transport_produce_fridge_v0", "scene": "FloorPlan27", "seed": 812, "n_agents": 2},
    {"task": "switch_off_bathroom_v0", "scene": "FloorPlan428", "seed": 77, "n_agents": 2},
]


def run_suite(out: Path, *overrides: str) -> dict[str, Any]:
    """Run the real runner inline (workers=0) into ``out``; returns its result."""
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        cfg = compose(
            "run",
            overrides=[f"output_dir={out}", "logger.console=false", "workers=0", *overrides],
        )
    return run(cfg, Console(file=io.StringIO()))


def write_challenge(path: Path, challenge_id: str, episodes: list[dict] | None = None) -> Path:
    """A challenge file of the hidden-seed ``test`` suite."""
    data = {
        "format": 1,
        "id": challenge_id,
        "suite": "test",
        "suite_version": "v1",
        "team": "team-a",
        "expires": "2030-01-01T00:00:00+00:00",
        "episodes": episodes or CHALLENGE_EPISODES,
    }
    path.write_text(json.dumps(data))
    return path


def members(data: bytes) -> dict[str, bytes]:
    """The members of a bundle we packed ourselves (trusted), in order."""
    return unpack(data)


def archive(contents: dict[str, bytes], rehash: bool = True) -> bytes:
    """A .tar.gz of ``contents``; with ``rehash`` the manifest lists their true sha256 (an
    attacker who edits a member also fixes the checksums)."""
    if rehash and MANIFEST in contents:
        contents = with_true_checksums(contents)
    return tar_bytes(contents)


def rows_of(contents: dict[str, bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in contents[ROWS].decode().splitlines()]


def with_rows(contents: dict[str, bytes], rows: list[dict[str, Any]]) -> dict[str, bytes]:
    out = dict(contents)
    out[ROWS] = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return out


def edit(data: bytes, change: Callable[[list[dict[str, Any]], dict[str, dict]], None]) -> bytes:
    """Apply ``change(rows, traces_by_key)`` to a bundle's rows and traces (in place) and pack
    it again with true checksums; traces of rows added or renamed are written under their key."""
    contents = members(data)
    rows = rows_of(contents)
    traces = {r["key"]: json.loads(contents[trace_member(r["key"])]) for r in rows}
    change(rows, traces)
    kept = {n: b for n, b in contents.items() if not n.startswith("traces/")}
    out = with_rows(kept, rows)
    for row in rows:
        out[trace_member(row["key"])] = json.dumps(traces[row["key"]]).encode()
    return archive(out)


def reseal(trace: dict[str, Any], row: dict[str, Any] | None = None) -> None:
    """Recompute an edited trace's hash (and the row's copy of it), as a forger would."""
    trace["trace_hash"] = trace_hash(trace)
    if row is not None:
        row["trace_hash"] = trace["trace_hash"]


def copy_of(own: bytes, copied: bytes, n: int) -> bytes:
    """``own`` with the rows and traces of its first ``n`` run episodes taken from ``copied``
    (another baseline's bundle of the same track, as public as every bundle on the board),
    renamed to ``own``'s baseline and keeping ``own``'s bookkeeping fields, as a team passing
    another team's traces off as its own would."""
    donor = members(copied)
    donor_rows = {r["key"].split("/", 1)[1]: r for r in rows_of(donor)}
    mine = ("key", "baseline", "trace_path", "code_version", "config_hash")

    def change(rows: list[dict], traces: dict[str, dict]) -> None:
        for row in [r for r in rows if not r["reference"]][:n]:
            theirs = donor_rows[row["key"].split("/", 1)[1]]
            taken = {**theirs, **{name: row[name] for name in mine}}
            row.clear()
            row.update(taken)
            traces[row["key"]] = json.loads(donor[trace_member(theirs["key"])])

    return edit(own, change)
