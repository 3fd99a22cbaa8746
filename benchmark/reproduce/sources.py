"""Where a table's episodes come from: fresh runs of ``benchmark.run``, or committed bundles.

A fresh run is ``python -m benchmark.run <overrides> output_dir=<dir>`` in a child process, so
that each run gets its own Hydra config and Ray session exactly as a user would start it; the
run directory resumes, so an interrupted reproduction picks up where it stopped. A committed
run is read from its bundles, ``<reference_dir>/<run id>.<track>.tar.gz`` (gzip'd tars of a
run directory's ``episodes.jsonl``, ``traces/`` and ``manifest.json``, as the leaderboard
packs them), without unpacking them to disk.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.reproduce.spec import RunSpec
from benchmark.results.bundles import BundleError, bundle_members, bundle_rows
from benchmark.results.run_dir import RunDirectory

Row = dict[str, Any]


class SourceError(RuntimeError):
    """A run that could not be made or read; the message names it."""


@dataclass
class RunData:
    """The episodes of one run of a table: rows (``ok`` and failed) and their traces."""

    spec: RunSpec
    rows: list[Row]
    load_trace: Callable[[Row], dict[str, Any]]
    origin: str  # the run directory or the bundles it was read from

    def labelled(self) -> list[Row]:
        """The rows with ``baseline`` set to the run's label (how the table names it)."""
        return [{**r, "baseline": self.spec.label} for r in self.rows]


def run_command(spec: RunSpec, out: Path, workers: int, short: bool) -> list[str]:
    """The command line of a fresh run into ``out``."""
    extra = list(spec.short) if short else []
    return [
        sys.executable,
        "-m",
        "benchmark.run",
        *spec.overrides,
        *extra,
        f"output_dir={out}",
        f"workers={workers}",
    ]


def fresh_run(spec: RunSpec, out: Path, workers: int, short: bool) -> RunData:
    """Run (or resume) ``spec`` into ``out``; SourceError when the run fails."""
    out.mkdir(parents=True, exist_ok=True)
    command = run_command(spec, out, workers, short)
    print(f"[reproduce] {spec.id}: {' '.join(command[1:])}", flush=True)
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise SourceError(f"run {spec.id} failed (exit {done.returncode}): {' '.join(command)}")
    return read_run_dir(spec, out)


def read_run_dir(spec: RunSpec, root: Path) -> RunData:
    """A run directory written by ``benchmark.run``."""
    run = RunDirectory(root)
    rows = run.rows()
    if not rows:
        raise SourceError(f"run {spec.id}: {root} holds no episode rows")
    return RunData(spec, rows, run.load_trace, str(root))


def bundle_paths(spec: RunSpec, reference_dir: Path) -> list[Path]:
    """The committed bundles of a run, by name."""
    return sorted(reference_dir.glob(f"{spec.id}.*.tar.gz"))


def read_bundles(spec: RunSpec, reference_dir: Path) -> RunData:
    """The committed run ``spec`` from its bundles; rows several bundles share (one-agent
    references) are kept once. SourceError when none exists or one is unreadable."""
    paths = bundle_paths(spec, reference_dir)
    if not paths:
        raise SourceError(
            f"run {spec.id} has no committed bundle {reference_dir}/{spec.id}.*.tar.gz"
        )
    rows: dict[str, Row] = {}
    traces: dict[str, bytes] = {}
    for path in paths:
        try:
            members = bundle_members(path)
        except BundleError as err:
            raise SourceError(f"run {spec.id}: {err}") from err
        for row in bundle_rows(members):
            rows.setdefault(row["key"], row)
        traces.update({k: v for k, v in members.items() if k.startswith("traces/")})
    origin = ", ".join(str(p) for p in paths)

    def load_trace(row: Row) -> dict[str, Any]:
        name = row.get("trace_path", "")
        if name not in traces:
            raise SourceError(f"run {spec.id}: no trace {name!r} for {row['key']} in {origin}")
        return json.loads(traces[name])

    return RunData(spec, list(rows.values()), load_trace, origin)
