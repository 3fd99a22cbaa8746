"""Tracks: what a submission is ranked against, and which episodes it must hold.

A track is one cell of the board: a suite (name and version) x team size x comm on/off x
observability x action level. Its episodes come from the benchmark's own suite files
(``configs/suite/<name>.yaml``): every seed of every suite entry that runs the track's team size,
each with the one-agent reference run of the same cell. A suite without published seeds (the
``test`` suite) is a hidden-seed suite: its episodes are those of a challenge the leaderboard
issued (:class:`benchmark.runner.challenge.Challenge`).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmark.env import EnvOptions
from benchmark.paths import CONFIGS_DIR
from benchmark.runner.challenge import Challenge
from benchmark.runner.jobs import Job
from benchmark.runner.results import RunDirectory
from benchmark.tasks import is_task_path

SUITES_DIR = CONFIGS_DIR / "suite"
# Suite names may hold "-" (the key splits the version off at the last one); versions may not.
_SUITE_NAME = re.compile(r"[A-Za-z0-9_-]+")
_SUITE_VERSION = re.compile(r"[A-Za-z0-9_]+")
_KEY = re.compile(
    r"(?P<suite>[A-Za-z0-9_-]+)-(?P<version>[A-Za-z0-9_]+)\.n(?P<n>[0-9]+)\."
    r"comm-(?P<comm>on|off)\.(?P<observability>[a-z]+)\.(?P<action_level>[a-z]+)"
)


@dataclass(frozen=True)
class Track:
    """One table of the board.

    Attributes:
        suite: suite name, e.g. ``smoke``, ``default``, ``test``.
        suite_version: the suite's version, e.g. ``v1``; tables of different versions never mix.
        n_agents: team size of the track's (non-reference) episodes.
        comm: whether messages are delivered (env option ``comm``).
        observability: env option ``observability``: ``partial`` or ``full``.
        action_level: env option ``action_level``: ``skill`` or ``primitive``.
    """

    suite: str
    suite_version: str
    n_agents: int
    comm: bool
    observability: str
    action_level: str

    def __post_init__(self) -> None:
        if not isinstance(self.suite, str) or not _SUITE_NAME.fullmatch(self.suite):
            raise ValueError(f"Track.suite={self.suite!r}: expected letters, digits, '_' or '-'")
        if not isinstance(self.suite_version, str) or not _SUITE_VERSION.fullmatch(
            self.suite_version
        ):
            raise ValueError(
                f"Track.suite_version={self.suite_version!r}: expected letters, digits or '_'"
            )
        if not isinstance(self.n_agents, int) or isinstance(self.n_agents, bool):
            raise ValueError(f"Track.n_agents={self.n_agents!r}: expected an integer >= 1")
        if self.n_agents < 1:
            raise ValueError(f"Track.n_agents={self.n_agents}: expected an integer >= 1")
        if not isinstance(self.comm, bool):
            raise ValueError(f"Track.comm={self.comm!r}: expected true or false")
        # EnvOptions validates the two env options and names the allowed values.
        EnvOptions(observability=self.observability, action_level=self.action_level)

    @property
    def key(self) -> str:
        """URL-safe id, e.g. ``smoke-v1.n2.comm-on.partial.skill``."""
        comm = "on" if self.comm else "off"
        return (
            f"{self.suite}-{self.suite_version}.n{self.n_agents}.comm-{comm}."
            f"{self.observability}.{self.action_level}"
        )

    @classmethod
    def from_key(cls, key: str) -> Track:
        """The track whose :attr:`key` is ``key``; ValueError naming the malformed part."""
        match = _KEY.fullmatch(key)
        if match is None:
            raise ValueError(
                f"track key {key!r}: expected <suite>-<version>.n<agents>.comm-<on|off>."
                "<observability>.<action_level>, e.g. smoke-v1.n2.comm-on.partial.skill"
            )
        return cls(
            suite=match["suite"],
            suite_version=match["version"],
            n_agents=int(match["n"]),
            comm=match["comm"] == "on",
            observability=match["observability"],
            action_level=match["action_level"],
        )

    @property
    def options(self) -> dict[str, Any]:
        """The env options the track fixes (every other option keeps its default)."""
        return {
            "comm": self.comm,
            "observability": self.observability,
            "action_level": self.action_level,
        }


@dataclass(frozen=True)
class EpisodeRef:
    """One episode a track expects.

    Attributes:
        task: registered task id.
        split: scene split of the suite entry.
        seed: episode seed.
        n_agents: team size (1 for a reference).
        comm: the track's comm setting.
        scene: the scene a challenge names or the suite entry pins; None where the seed
            chooses it within the split.
        reference: the one-agent reference run of the same cell (for speedup and EI).
    """

    task: str
    split: str
    seed: int
    n_agents: int
    comm: bool
    scene: str | None = None
    reference: bool = False

    def key(self, baseline: str) -> str:
        """The runner's row key of this episode run by ``baseline`` (``Job.key``)."""
        return Job(
            task=self.task,
            split=self.split,
            n_agents=self.n_agents,
            seed=self.seed,
            comm=self.comm,
            baseline=baseline,
            reference=self.reference,
            scene=self.scene,
        ).key

    @classmethod
    def of_row(cls, row: dict[str, Any], with_scene: bool) -> EpisodeRef:
        """The episode a result row says it is; ``with_scene`` for challenge episodes, whose
        scene is part of their identity."""
        return cls(
            task=row["task"],
            split=row["split"],
            seed=row["seed"],
            n_agents=row["n_agents"],
            comm=row["comm"],
            scene=row["scene"] if with_scene else None,
            reference=row["reference"],
        )


@dataclass(frozen=True)
class SuiteEntry:
    """One row of a suite file: a registered task, its split, team sizes and seeds, and the
    scenes it pins (each seed runs on each of them; none: the seed chooses in the split)."""

    task: str
    split: str
    n_agents: tuple[int, ...]
    seeds: tuple[int, ...]
    scenes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suite:
    """A suite file of the benchmark (``configs/suite/<name>.yaml``)."""

    name: str
    version: str
    entries: tuple[SuiteEntry, ...]

    @property
    def hidden(self) -> bool:
        """Whether the seeds are hidden (episodes come from a challenge)."""
        return not self.entries[0].seeds


def _int_list(path: Path, field: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ValueError(f"{path}: field {field!r}: expected a list of integers, got {value!r}")
    return tuple(value)


def _parse_suite(path: Path) -> Suite:
    return _parse_suite_version(path, path.stat().st_mtime_ns)


# Every upload and every verification reads the suites: each file is parsed once per version
# of it (its modification time), not once per call.
@functools.lru_cache(maxsize=256)
def _parse_suite_version(path: Path, _mtime_ns: int) -> Suite:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with name, version and entries")
    for field in ("name", "version"):
        if not isinstance(data.get(field), str):
            raise ValueError(f"{path}: field {field!r}: expected a string")
    raw = data.get("entries")
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{path}: field 'entries': expected a non-empty list")
    entries = []
    for k, entry in enumerate(raw):
        where = f"entries[{k}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("task"), str):
            raise ValueError(f"{path}: field '{where}.task': expected a task id")
        if is_task_path(entry["task"]):
            raise ValueError(
                f"{path}: field '{where}.task': {entry['task']!r} is a file path; the board's "
                "suites name registered tasks"
            )
        entries.append(
            SuiteEntry(
                task=entry["task"],
                split=str(entry.get("split", "test")),
                n_agents=_int_list(path, f"{where}.n_agents", entry.get("n_agents", [2])),
                seeds=_int_list(path, f"{where}.seeds", entry.get("seeds", [0])),
                scenes=tuple(entry.get("scenes") or ()),
            )
        )
    if len({bool(e.seeds) for e in entries}) != 1:
        raise ValueError(
            f"{path}: field 'entries': some entries list seeds and some do not; a suite either "
            "publishes its seeds or hides them all"
        )
    return Suite(name=data["name"], version=data["version"], entries=tuple(entries))


def suites(root: Path = SUITES_DIR) -> dict[str, Suite]:
    """Every suite file under ``root``, by suite name."""
    out = {}
    for path in sorted(root.glob("*.yaml")):
        suite = _parse_suite(path)
        if suite.name != path.stem:
            raise ValueError(f"{path}: field 'name': expected the file name {path.stem!r}")
        out[suite.name] = suite
    return out


def load_suite(name: str, root: Path = SUITES_DIR) -> Suite:
    """The suite called ``name``; ValueError listing the known suites."""
    known = suites(root)
    if name not in known:
        raise ValueError(f"unknown suite {name!r}; known suites are {sorted(known)}")
    return known[name]


Cell = tuple[str, str, int, str | None]  # task, split, seed, scene (None: chosen by the seed)


def _cells(suite: Suite, n_agents: int, challenge: Challenge | None) -> list[Cell]:
    """The cells of every episode of ``suite`` with ``n_agents``."""
    split = {e.task: e.split for e in suite.entries if n_agents in e.n_agents}
    if not suite.hidden:
        if challenge is not None:
            raise ValueError(
                f"suite {suite.name} {suite.version} publishes its seeds: its episodes do not "
                f"come from a challenge (got challenge {challenge.id})"
            )
        return [
            (e.task, e.split, seed, scene)
            for e in suite.entries
            if n_agents in e.n_agents
            for scene in (e.scenes or (None,))
            for seed in e.seeds
        ]
    if challenge is None:
        raise ValueError(
            f"suite {suite.name} {suite.version} hides its seeds: its episodes are those of a "
            "challenge, and none was given"
        )
    if (challenge.suite, challenge.suite_version) != (suite.name, suite.version):
        raise ValueError(
            f"challenge {challenge.id} is for suite {challenge.suite} {challenge.suite_version}, "
            f"not {suite.name} {suite.version}"
        )
    cells = []
    for ep in challenge.episodes:
        if ep.n_agents != n_agents:
            continue
        if ep.task not in split:
            raise ValueError(
                f"challenge {challenge.id}: episode {ep} is not a cell of suite {suite.name}"
            )
        cells.append((ep.task, split[ep.task], ep.seed, ep.scene))
    return cells


def expected_episodes(track: Track, challenge: Challenge | None = None) -> list[EpisodeRef]:
    """Every episode of ``track``: its run episodes, each followed by its one-agent reference
    (when the track's team size is not 1; cells sharing a reference list it once).

    A hidden-seed suite needs the ``challenge`` the submission answers; a suite with published
    seeds takes none. ValueError names what does not fit (unknown suite, other version, a
    challenge of another suite).
    """
    suite = load_suite(track.suite)
    if suite.version != track.suite_version:
        raise ValueError(
            f"suite {suite.name} is at version {suite.version}, the track is for "
            f"{track.suite_version}"
        )
    out: list[EpisodeRef] = []
    for task, split, seed, scene in _cells(suite, track.n_agents, challenge):
        common = {"task": task, "split": split, "seed": seed, "comm": track.comm, "scene": scene}
        out.append(EpisodeRef(n_agents=track.n_agents, **common))
        if track.n_agents != 1:
            reference = EpisodeRef(n_agents=1, reference=True, **common)
            if reference not in out:
                out.append(reference)
    return out


def track_of_episode(
    suite: str, suite_version: str, row: dict[str, Any], options: dict[str, Any]
) -> Track:
    """The track of a run episode (not a reference): its team size from the row, and comm,
    observability and action level from the env ``options`` its trace records."""
    if row.get("reference"):
        raise ValueError(f"episode {row.get('key')}: a reference has no track of its own")
    return Track(
        suite=suite,
        suite_version=suite_version,
        n_agents=row["n_agents"],
        comm=options["comm"],
        observability=options["observability"],
        action_level=options["action_level"],
    )


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


def tracks_of_run(run: Run) -> dict[Track, list[dict[str, Any]]]:
    """The run episodes (no references) that finished, grouped by their track."""
    out: dict[Track, list[dict[str, Any]]] = {}
    for row in run.rows:
        if row.get("reference") or row.get("status") != "ok":
            continue
        options = run.trace(row)["config"]["options"]
        track = track_of_episode(run.suite, run.suite_version, row, options)
        out.setdefault(track, []).append(row)
    return out
