"""Challenges: the exact episodes of a run on a hidden-seed suite, as the leaderboard issues them.

A challenge file (JSON) names its id, the suite and suite version it belongs to, the team it was
issued to, when it expires (ISO 8601, UTC), and its episodes: task, scene, seed and team size of
each cell. ``python -m benchmark.run suite=test challenge=challenge.json`` runs exactly those
episodes and records the challenge id in every trace (env option ``challenge``), so the
leaderboard can tell which challenge a submission answers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

CHALLENGE_FORMAT = 1


class ChallengeError(ValueError):
    """A challenge file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class ChallengeEpisode:
    """One episode of a challenge: a task x scene cell and the seed drawn for it."""

    task: str
    scene: str
    seed: int
    n_agents: int


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

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["format"] = CHALLENGE_FORMAT
        out["episodes"] = [asdict(e) for e in self.episodes]
        return out

    @classmethod
    def from_json(cls, data: Any, source: str = "challenge") -> Challenge:
        """Parse and validate; raises ChallengeError naming ``source`` and the field."""
        if not isinstance(data, dict):
            raise ChallengeError(f"{source}: expected a JSON object")
        if data.get("format") != CHALLENGE_FORMAT:
            raise ChallengeError(
                f"{source}: field 'format': expected {CHALLENGE_FORMAT}, got {data.get('format')!r}"
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
            episodes.append(ChallengeEpisode(e["task"], e["scene"], e["seed"], e["n_agents"]))
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
