"""The run directory: resolved config, manifest, append-only episode rows, and traces.

``episodes.jsonl`` gets one JSON line per finished episode, flushed and synced at once;
re-running into the same directory reads it back and skips what is already there, so a
resumed run neither repeats nor loses episodes.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from benchmark.paths import REPO_ROOT, write_atomically
from benchmark.version import __version__

PACKAGES = ("numpy", "hydra-core", "omegaconf", "pettingzoo", "gymnasium", "ray", "torch")


def config_hash(config: dict[str, Any]) -> str:
    """Hash of the parts of the config that decide the results (not workers, loggers, paths)."""
    relevant = {
        k: config[k]
        for k in ("suite", "baseline", "llm", "env", "n_agents", "seeds", "comm", "reference")
        if k in config
    }
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[
        :16
    ]


def code_version() -> str:
    """Package version plus the git commit (and '+dirty') when run from a checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        commit = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{__version__}+{commit}" if commit else __version__


class RunDirectory:
    """Files of one run under ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.traces = self.root / "traces"
        self.media = self.root / "episodes"
        self.rows_path = self.root / "episodes.jsonl"
        self.traces.mkdir(parents=True, exist_ok=True)

    def write_manifest(
        self, config: dict[str, Any], suite_version: str, finished: bool = False
    ) -> dict[str, Any]:
        """Write the run's manifest (config hash, code version, packages). A ``finished`` run
        (nothing left to play) keeps the manifest it has when that is of the same config, so
        running a finished run again changes nothing in its directory."""
        path = self.root / "manifest.json"
        if finished and path.is_file():
            try:
                kept = json.loads(path.read_text())
            except json.JSONDecodeError:
                kept = None
            if isinstance(kept, dict) and kept.get("config_hash") == config_hash(config):
                return kept
        versions = {}
        for name in PACKAGES:
            try:
                versions[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                versions[name] = None
        manifest = {
            "config_hash": config_hash(config),
            "code_version": code_version(),
            "suite": config["suite"]["name"],
            "suite_version": suite_version,
            "python": platform.python_version(),
            "packages": versions,
        }
        path.write_text(json.dumps(manifest, indent=1))
        return manifest

    def rows(self) -> list[dict[str, Any]]:
        """Rows recorded so far; a torn last line (a crash mid-write) is ignored."""
        if not self.rows_path.exists():
            return []
        out = []
        for line in self.rows_path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return out

    def done(self) -> set[str]:
        return {r["key"] for r in self.rows()}

    def set_aside_errors(self) -> list[str]:
        """Move the error rows to ``episodes.errors.jsonl`` (appended, so nothing is lost), so
        that a resumed run plays those episodes again; returns their keys. An episode whose
        worker was killed (out of memory, say) is an error of the machine, not of the episode."""
        if not self.rows_path.exists():
            return []
        rows = self.rows()  # a torn line is dropped
        errors = [r for r in rows if r.get("status") == "error"]
        if not errors:
            return []
        kept = [r for r in rows if r.get("status") != "error"]
        with (self.root / "episodes.errors.jsonl").open("a") as handle:
            handle.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in errors))
            handle.flush()
            os.fsync(handle.fileno())
        kept_text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept)
        write_atomically(self.rows_path, kept_text)  # replaced whole: a crash keeps the old file
        return [r["key"] for r in errors]

    def trace_path(self, key: str) -> Path:
        return self.traces / (key.replace("/", "__") + ".json")

    def record(self, row: dict[str, Any], trace: dict[str, Any] | None) -> dict[str, Any]:
        """Write the trace (if any), then append the row; returns the row as written."""
        if trace is not None:
            path = self.trace_path(row["key"])
            write_atomically(path, json.dumps(trace))
            row = {**row, "trace_path": str(path.relative_to(self.root))}
        line = (json.dumps(row, sort_keys=True) + "\n").encode()
        with self.rows_path.open("ab+") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() > 0:
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) != b"\n":  # a torn line from a crash: start a fresh one
                    line = b"\n" + line
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        return row

    def load_trace(self, row: dict[str, Any]) -> dict[str, Any]:
        return json.loads((self.root / row["trace_path"]).read_text())


@dataclass(frozen=True)
class Run:
    """A run directory written by ``python -m benchmark.run``, read for submission.

    Attributes:
        root: the directory.
        manifest: its ``manifest.json`` (suite, suite_version, config_hash, code_version).
        config: its resolved ``config.yaml`` (baseline, llm, challenge, ...).
        rows: its ``episodes.jsonl`` rows, in order.
    """

    root: Path
    manifest: dict[str, Any]
    config: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def suite(self) -> str:
        return self.manifest["suite"]

    @property
    def suite_version(self) -> str:
        return self.manifest["suite_version"]

    def trace_bytes(self, row: dict[str, Any]) -> bytes:
        """The trace file of an episode that finished (status ok), as written."""
        return (self.root / row["trace_path"]).read_bytes()

    def trace(self, row: dict[str, Any]) -> dict[str, Any]:
        return json.loads(self.trace_bytes(row))


def read_run(run_dir: str | Path) -> Run:
    """Read a run directory; ValueError naming the file that is missing or malformed.

    A torn line of ``episodes.jsonl`` (a run killed mid-write) is no row: that episode is
    missing, and the run must be resumed before it can be submitted.
    """
    root = Path(run_dir)
    files = {name: root / name for name in ("manifest.json", "config.yaml", "episodes.jsonl")}
    for name, path in files.items():
        if not path.is_file():
            raise ValueError(f"{root}: no {name}; not a run directory of benchmark.run")
    try:
        manifest = json.loads(files["manifest.json"].read_text())
        config = yaml.safe_load(files["config.yaml"].read_text())
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ValueError(f"{root}: malformed manifest.json or config.yaml: {err}") from err
    # The runner's own reading: a torn line (a crash mid-write) is no row.
    rows = RunDirectory(root).rows()
    for field in ("suite", "suite_version"):
        if not isinstance(manifest.get(field), str):
            raise ValueError(f"{files['manifest.json']}: field {field!r}: expected a string")
    return Run(root=root, manifest=manifest, config=config, rows=rows)
