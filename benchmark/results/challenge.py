"""Challenges: the exact episodes of a run on a hidden-seed suite, as the leaderboard issues them.

A challenge file (JSON) names its id, the suite and suite version it belongs to, the team it was
issued to, when it expires (ISO 8601, UTC), and its episodes: task, scene, seed and team size of
each cell. ``python -m benchmark.run suite=test challenge=challenge.json`` runs exactly those
episodes and records the challenge id in every trace (env option ``challenge``), so the
leaderboard can tell which challenge a submission answers.

On a suite with a focal seat (``focal`` in the suite file: the cross-play and human tracks)
every episode also names its ``partner``, the member of the server's partner population that
plays every agent but ``agent_0`` (:class:`Partner`: ``label``, ``baseline``, ``kwargs``).
Format 2 holds partners; format 1, a challenge without them, is still read and still written
for one (so a runner that knows only format 1 runs every test-track challenge).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmark.results.crossplay import LABEL

CHALLENGE_FORMAT = 2
CHALLENGE_FORMATS = (1, 2)  # 1: no partner assignments
PARTNER_FIELDS = ("label", "baseline", "kwargs")


class ChallengeError(ValueError):
    """A challenge file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Partner:
    """The partner assigned to a challenge episode: a mixed-team member that plays every agent
    but ``agent_0`` (``label`` names it in traces and rows, ``baseline`` is a registered team,
    ``kwargs`` its constructor arguments)."""

    label: str
    baseline: str
    kwargs: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not LABEL.match(self.label):
            raise ChallengeError(
                f"field 'label': {self.label!r} is not letters, digits, '_', '.' or '-'"
            )
        if not isinstance(self.baseline, str) or not self.baseline:
            raise ChallengeError(f"field 'baseline': expected a team name, got {self.baseline!r}")
        if not isinstance(self.kwargs, Mapping) or not all(isinstance(k, str) for k in self.kwargs):
            raise ChallengeError(f"field 'kwargs': expected an object, got {self.kwargs!r}")

    def member(self) -> dict[str, Any]:
        """The partner as a mixed-team member (:mod:`benchmark.agents.mixed`)."""
        return {"label": self.label, "baseline": self.baseline, "kwargs": dict(self.kwargs)}

    def to_json(self) -> dict[str, Any]:
        return self.member()

    @classmethod
    def from_json(cls, data: Any) -> Partner:
        """Parse and validate; ChallengeError naming the field."""
        if not isinstance(data, Mapping):
            raise ChallengeError(f"expected an object with {list(PARTNER_FIELDS)}, got {data!r}")
        unknown = sorted(map(str, set(data) - set(PARTNER_FIELDS)))
        if unknown:
            raise ChallengeError(f"unknown field(s) {unknown}; valid: {list(PARTNER_FIELDS)}")
        return cls(data.get("label"), data.get("baseline"), data.get("kwargs", {}))


@dataclass(frozen=True)
class ChallengeEpisode:
    """One episode of a challenge: a task x scene cell, the seed drawn for it, and on a suite
    with a focal seat the partner drawn for it."""

    task: str
    scene: str
    seed: int
    n_agents: int
    partner: Partner | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "task": self.task,
            "scene": self.scene,
            "seed": self.seed,
            "n_agents": self.n_agents,
        }
        if self.partner is not None:
            out["partner"] = self.partner.to_json()
        return out


@dataclass(frozen=True)
class Challenge:
    """An issued challenge (see the module docstring)."""

    id: str
    suite: str
    suite_version: str
    team: str
    expires: str
    episodes: tuple[ChallengeEpisode, ...]

    def __post_init__(self) -> None:
        for name in ("id", "suite", "suite_version", "team"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ChallengeError(f"field {name!r}: expected a non-empty string")
        try:
            stamp = datetime.fromisoformat(self.expires)
        except (TypeError, ValueError) as err:
            raise ChallengeError(f"field 'expires': {self.expires!r} is not ISO 8601") from err
        if stamp.tzinfo is None:
            raise ChallengeError(f"field 'expires': {self.expires!r} has no time zone")
        if not self.episodes:
            raise ChallengeError("field 'episodes': a challenge has at least one episode")
        cells = [(e.task, e.scene, e.seed, e.n_agents) for e in self.episodes]
        if len(set(cells)) != len(cells):
            raise ChallengeError("field 'episodes': the same episode is listed twice")
        for k, e in enumerate(self.episodes):
            if e.partner is not None and e.n_agents < 2:
                raise ChallengeError(
                    f"field 'episodes[{k}].partner': a one-agent episode has no partner"
                )

    @property
    def format(self) -> int:
        """The oldest format that holds the challenge: 2 when it assigns partners, else 1."""
        return 2 if any(e.partner is not None for e in self.episodes) else 1

    def partner_of(self, task: str, scene: str | None, seed: int, n_agents: int) -> Partner | None:
        """The partner assigned to the episode (None: none is, or no such episode)."""
        for e in self.episodes:
            if (e.task, e.scene, e.seed, e.n_agents) == (task, scene, seed, n_agents):
                return e.partner
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "suite": self.suite,
            "suite_version": self.suite_version,
            "team": self.team,
            "expires": self.expires,
            "episodes": [e.to_json() for e in self.episodes],
            "format": self.format,
        }

    @classmethod
    def from_json(cls, data: Any, source: str = "challenge") -> Challenge:
        """Parse and validate; raises ChallengeError naming ``source`` and the field."""
        if not isinstance(data, dict):
            raise ChallengeError(f"{source}: expected a JSON object")
        version = data.get("format")
        if isinstance(version, bool) or version not in CHALLENGE_FORMATS:
            raise ChallengeError(
                f"{source}: field 'format': expected one of {list(CHALLENGE_FORMATS)}, got "
                f"{version!r}"
            )
        fields = ("id", "suite", "suite_version", "team", "expires", "episodes")
        missing = [f for f in fields if f not in data]
        if missing:
            raise ChallengeError(f"{source}: missing field(s) {missing}")
        episodes = []
        for k, e in enumerate(data["episodes"] if isinstance(data["episodes"], list) else [None]):
            ok = (
                isinstance(e, dict)
                and isinstance(e.get("task"), str)
                and isinstance(e.get("scene"), str)
                and all(
                    isinstance(e.get(f), int) and not isinstance(e.get(f), bool)
                    for f in ("seed", "n_agents")
                )
            )
            if not ok:
                raise ChallengeError(
                    f"{source}: field 'episodes[{k}]': expected task, scene (strings), seed and "
                    f"n_agents (integers), got {e!r}"
                )
            partner = None
            if e.get("partner") is not None:
                where = f"{source}: field 'episodes[{k}].partner'"
                if version < 2:
                    raise ChallengeError(f"{where}: format {version} assigns no partners (2 does)")
                try:
                    partner = Partner.from_json(e["partner"])
                except ChallengeError as err:
                    raise ChallengeError(f"{where}: {err}") from err
            episodes.append(
                ChallengeEpisode(e["task"], e["scene"], e["seed"], e["n_agents"], partner)
            )
        try:
            return cls(
                id=data["id"],
                suite=data["suite"],
                suite_version=data["suite_version"],
                team=data["team"],
                expires=data["expires"],
                episodes=tuple(episodes),
            )
        except ChallengeError as err:
            raise ChallengeError(f"{source}: {err}") from err


def load_challenge(path: str | Path) -> Challenge:
    """The challenge in the JSON file ``path``."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise ChallengeError(f"{path}: cannot be read: {err}") from err
    except json.JSONDecodeError as err:
        raise ChallengeError(f"{path}: not valid JSON: {err}") from err
    return Challenge.from_json(data, str(path))
