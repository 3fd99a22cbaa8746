"""Tracks: what a submission is ranked against, and which episodes it must hold.

A track is one cell of the board: a suite (name and version) x team size x comm on/off x
observability x action level. Its episodes come from the benchmark's own suite files
(``configs/suite/<name>.yaml``): every seed of every suite entry that runs the track's team size,
each with the one-agent reference run of the same cell. A suite without published seeds (the
``test`` suite) is a hidden-seed suite: its episodes are those of a challenge the leaderboard
issued (:class:`benchmark.results.challenge.Challenge`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from benchmark.env import EnvOptions
from benchmark.results.challenge import Challenge
from benchmark.results.run_dir import Run
from benchmark.results.suite import EpisodeRef, load_suite, suite_episodes

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


def expected_episodes(track: Track, challenge: Challenge | None = None) -> list[EpisodeRef]:
    """Every episode of ``track``: :func:`benchmark.results.suite.suite_episodes` of its suite
    for its team size and comm setting (each run episode followed by its one-agent reference),
    the same list the runner plays.

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
    return suite_episodes(suite, comm=track.comm, challenge=challenge, n_agents=track.n_agents)


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
