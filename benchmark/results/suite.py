"""Suites and their episodes: one parser and one list of episodes for the runner and the board.

A suite file (``configs/suite/<name>.yaml``) names a version and entries: a task, its scene
split, the team sizes and seeds to run, and optionally the floor plans it pins. A suite whose
entries list no seeds hides them: its episodes are those of a challenge
(:class:`~benchmark.results.challenge.Challenge`). :func:`suite_episodes` is the one list of a
suite's episodes, each run episode followed by its one-agent reference: ``python -m
benchmark.run`` plays that list and the leaderboard expects it, so the two cannot drift.

A hidden-seed suite may have a focal seat (``focal``): then ``agent_0`` of every episode is
played by the submitted team (``team``: the cross-play track) or by a person (``human``: the
human-in-the-loop track), and every other agent by the partner its challenge assigns to the
episode (:class:`~benchmark.results.challenge.Partner`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from benchmark.paths import CONFIGS_DIR
from benchmark.results.challenge import Challenge
from benchmark.tasks.spec import is_task_path

SUITES_DIR = CONFIGS_DIR / "suite"
# Who plays agent_0 of a suite with a focal seat: the submitted team, or a person.
FOCAL_SEATS = ("team", "human")


@dataclass(frozen=True)
class SuiteEntry:
    """One row of a suite: a task (a registered id, or a task file's path where the suite
    allows them), its split, team sizes and seeds, and the scenes it pins (each seed runs on
    each of them; none: the seed chooses in the split)."""

    task: str
    split: str
    n_agents: tuple[int, ...]
    seeds: tuple[int, ...]
    scenes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suite:
    """A suite (see the module docstring); ``focal`` is None or one of :data:`FOCAL_SEATS`."""

    name: str
    version: str
    entries: tuple[SuiteEntry, ...]
    focal: str | None = None

    @property
    def hidden(self) -> bool:
        """Whether the seeds are hidden (episodes come from a challenge)."""
        return not self.entries[0].seeds

    def with_overrides(
        self, seeds: Sequence[int] | None = None, n_agents: Sequence[int] | None = None
    ) -> Suite:
        """Every entry with these seeds and/or team sizes instead of its own."""
        entries = tuple(
            replace(
                e,
                seeds=e.seeds if seeds is None else tuple(int(s) for s in seeds),
                n_agents=e.n_agents if n_agents is None else tuple(int(n) for n in n_agents),
            )
            for e in self.entries
        )
        return replace(self, entries=entries)


@dataclass(frozen=True)
class EpisodeRef:
    """One episode of a suite.

    Attributes:
        task: the task id.
        split: scene split of the suite entry.
        seed: episode seed.
        n_agents: team size (1 for a reference).
        comm: whether messages are delivered.
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
        """The id of this episode run by ``baseline`` within a run (result rows' ``key``)."""
        return episode_key(
            baseline,
            self.task,
            self.split,
            self.scene,
            self.n_agents,
            self.seed,
            self.comm,
            self.reference,
        )

    @classmethod
    def of_row(cls, row: Mapping[str, Any], with_scene: bool) -> EpisodeRef:
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


def episode_key(
    baseline: str,
    task: str,
    split: str,
    scene: str | None,
    n_agents: int,
    seed: int,
    comm: bool,
    reference: bool,
) -> str:
    """Unique, readable id of an episode within a run."""
    role = "ref" if reference else "run"
    where = split if scene is None else f"{split}/{scene}"
    return f"{baseline}/{task}/{where}/n{n_agents}/s{seed}/comm{int(comm)}/{role}"


# ------------------------------------------------------------------------------ parsing
def _int_list(where: str, field: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ValueError(f"{where}: field {field!r}: expected a list of integers, got {value!r}")
    return tuple(value)


def parse_suite(data: Any, where: str, registered_only: bool = False) -> Suite:
    """A suite from its mapping (a suite file's content, or the runner's composed config);
    ValueError naming ``where`` and the field that is wrong. ``registered_only``: refuse task
    file paths (the board's suites name registered tasks)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a mapping with name, version and entries")
    for field in ("name", "version"):
        if not isinstance(data.get(field), str):
            raise ValueError(f"{where}: field {field!r}: expected a string")
    raw = data.get("entries")
    if not isinstance(raw, list | tuple) or not raw:
        raise ValueError(f"{where}: field 'entries': expected a non-empty list")
    entries = []
    for k, entry in enumerate(raw):
        at = f"entries[{k}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("task"), str):
            raise ValueError(f"{where}: field '{at}.task': expected a task id")
        if registered_only and is_task_path(entry["task"]):
            raise ValueError(
                f"{where}: field '{at}.task': {entry['task']!r} is a file path; the board's "
                "suites name registered tasks"
            )
        scenes = entry.get("scenes") or ()
        if not isinstance(scenes, list | tuple) or not all(isinstance(s, str) for s in scenes):
            raise ValueError(f"{where}: field '{at}.scenes': expected a list of scene names")
        entries.append(
            SuiteEntry(
                task=entry["task"],
                split=str(entry.get("split", "test")),
                n_agents=_int_list(where, f"{at}.n_agents", entry.get("n_agents", [2])),
                seeds=_int_list(where, f"{at}.seeds", entry.get("seeds", [0])),
                scenes=tuple(scenes),
            )
        )
    if len({bool(e.seeds) for e in entries}) != 1:
        raise ValueError(
            f"{where}: field 'entries': some entries list seeds and some do not; a suite either "
            "publishes its seeds or hides them all"
        )
    focal = data.get("focal")
    if focal is not None:
        if focal not in FOCAL_SEATS:
            raise ValueError(
                f"{where}: field 'focal': expected one of {list(FOCAL_SEATS)} or none, got "
                f"{focal!r}"
            )
        if entries[0].seeds:
            raise ValueError(
                f"{where}: field 'focal': a suite with a focal seat hides its seeds (the "
                "partners come with each challenge)"
            )
        for k, e in enumerate(entries):
            if min(e.n_agents) < 2:
                raise ValueError(
                    f"{where}: field 'entries[{k}].n_agents': a suite with a focal seat plays "
                    f"teams of 2 or more, got {list(e.n_agents)}"
                )
    return Suite(name=data["name"], version=data["version"], entries=tuple(entries), focal=focal)


# Every upload and every verification reads the suites: each file is parsed once per version
# of it (its modification time), not once per call.
@functools.lru_cache(maxsize=256)
def _parse_file(path: Path, _mtime_ns: int) -> Suite:
    return parse_suite(yaml.safe_load(path.read_text()), str(path), registered_only=True)


def suites(root: Path = SUITES_DIR) -> dict[str, Suite]:
    """Every suite file under ``root``, by suite name."""
    out = {}
    for path in sorted(root.glob("*.yaml")):
        suite = _parse_file(path, path.stat().st_mtime_ns)
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


# ------------------------------------------------------------------------------ episodes
def suite_episodes(
    suite: Suite,
    comm: bool = True,
    challenge: Challenge | None = None,
    n_agents: int | None = None,
    references: bool = True,
) -> list[EpisodeRef]:
    """Every episode of ``suite`` (only those of team size ``n_agents`` when given), each
    cell's run episodes followed by its one-agent reference when ``references`` and the cell
    runs no one-agent team itself (cells that share a reference list it once).

    A suite with published seeds runs each seed of each entry (on each scene it pins); a
    hidden-seed suite runs exactly the episodes of ``challenge``, which must be for this suite
    and version. ValueError names what does not fit.
    """
    cells: list[tuple[SuiteEntry, int, tuple[int, ...], str | None]] = []
    if not suite.hidden:
        if challenge is not None:
            raise ValueError(
                f"suite {suite.name} {suite.version} publishes its seeds: its episodes do not "
                f"come from a challenge (got challenge {challenge.id})"
            )
        for e in suite.entries:
            sizes = tuple(n for n in e.n_agents if n_agents in (None, n))
            if sizes:
                scenes = e.scenes or (None,)
                cells += [(e, seed, sizes, scene) for scene in scenes for seed in e.seeds]
    else:
        if challenge is None:
            raise ValueError(
                f"suite {suite.name} {suite.version} hides its seeds: its episodes are those "
                "of a challenge, and none was given"
            )
        if (challenge.suite, challenge.suite_version) != (suite.name, suite.version):
            raise ValueError(
                f"challenge {challenge.id} is for suite {challenge.suite} "
                f"{challenge.suite_version}, not {suite.name} {suite.version}"
            )
        entries = {e.task: e for e in suite.entries}
        for ep in challenge.episodes:
            if n_agents is not None and ep.n_agents != n_agents:
                continue
            entry = entries.get(ep.task)
            if entry is None or ep.n_agents not in entry.n_agents:
                raise ValueError(
                    f"challenge {challenge.id}: episode {ep} is not a cell of suite {suite.name}"
                )
            if (ep.partner is None) != (suite.focal is None):
                raise ValueError(
                    f"challenge {challenge.id}: episode {ep.task} {ep.scene} seed {ep.seed} "
                    + (
                        f"has no partner, and suite {suite.name} assigns one to every episode"
                        if ep.partner is None
                        else f"assigns a partner, and suite {suite.name} has no focal seat"
                    )
                )
            cells.append((entry, ep.seed, (ep.n_agents,), ep.scene))
    out: list[EpisodeRef] = []
    seen: set[EpisodeRef] = set()
    for entry, seed, sizes, scene in cells:
        common = {"task": entry.task, "split": entry.split, "seed": seed, "comm": comm}
        out += [EpisodeRef(n_agents=n, scene=scene, **common) for n in sizes]
        if references and 1 not in sizes:
            reference = EpisodeRef(n_agents=1, scene=scene, reference=True, **common)
            if reference not in seen:
                seen.add(reference)
                out.append(reference)
    return out
