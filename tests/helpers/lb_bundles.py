"""Real runs and bundle surgery for the leaderboard tests: runs come from the real runner, and
bad bundles are derived from the bytes of a packed one."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from rich.console import Console

from benchmark.env import trace_hash
from benchmark.paths import CONFIGS_DIR
from benchmark.runner.app import run
from benchmark.runner.config import register_configs
from leaderboard.bundle import MANIFEST, ROWS, trace_member

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
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def archive(contents: dict[str, bytes], rehash: bool = True) -> bytes:
    """A .tar.gz of ``contents``; with ``rehash`` the manifest lists their true sha256 (an
    attacker who edits a member also fixes the checksums)."""
    contents = dict(contents)
    if rehash and MANIFEST in contents:
        manifest = json.loads(contents[MANIFEST])
        manifest["members"] = {
            name: hashlib.sha256(blob).hexdigest()
            for name, blob in contents.items()
            if name != MANIFEST
        }
        contents[MANIFEST] = json.dumps(manifest).encode()
    raw = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, blob in contents.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return raw.getvalue()


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
