"""Challenges of the hidden-seed test track: the same task x scene cells for every team, seeds
drawn from a hidden pool with the server's secret.

A hidden-seed suite (``configs/suite/test.yaml``: every entry's seed list is empty) has fixed
*cells*: for each entry, each team size it lists and each of its first ``scenes`` eligible
scenes of the entry's split (the task's scene order) where the episode can be set up. A
challenge gives every cell one seed, ``HMAC-SHA256(secret, [team, challenge id, cell, draw])``
mapped into :data:`SEED_POOL`; a seed whose episode (or its one-agent reference) cannot be set
up is drawn again (``draw`` + 1). So a team cannot predict its seeds, two teams (or two
challenges) get different ones, and the same inputs always give the same challenge.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from benchmark.results.challenge import Challenge, ChallengeEpisode
from benchmark.results.suite import load_suite
from benchmark.tasks.episode import make_episode
from benchmark.tasks.spec import load_task

# The hidden pool: [low, high). Every seed the benchmark publishes is below it: the suites'
# seeds and the trainers' held-out evaluation seeds (from 1,000,000; suite rl_heldout).
SEED_POOL = (10_000_000, 2**31)
MAX_DRAWS = 32
# The seed with which a scene must set up to be a cell (the task's scene list is fixed data).
PROBE_SEED = 0


@dataclass(frozen=True)
class Cell:
    """One task x scene x team size of a hidden-seed suite."""

    task: str
    split: str
    scene: str
    n_agents: int


def _sets_up(task: str, scene: str, n_agents: int, seed: int, split: str) -> bool:
    """Whether the episode and its one-agent reference can be built."""
    spec = load_task(task)
    try:
        make_episode(spec, scene, n_agents, seed, split)
        if n_agents != 1:
            make_episode(spec, scene, 1, seed, split, strict_agents=False)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=16)
def suite_cells(suite: str, scenes: int) -> tuple[str, tuple[Cell, ...]]:
    """The suite's version and its cells (``scenes`` scenes per entry and team size)."""
    if scenes < 1:
        raise ValueError(f"scenes={scenes} must be >= 1")
    data = load_suite(suite)
    if not data.hidden:
        raise ValueError(f"suite {suite!r} publishes seeds; challenges are for hidden-seed suites")
    cells = []
    for k, entry in enumerate(data.entries):
        spec = load_task(entry.task)
        for n in entry.n_agents:
            chosen = [
                s
                for s in spec.eligible_scenes(entry.split)
                if _sets_up(spec.id, s, n, PROBE_SEED, entry.split)
            ][:scenes]
            if not chosen:
                raise ValueError(
                    f"suite {suite!r} entry {k}: task {spec.id} sets up in no scene of split "
                    f"{entry.split!r} with {n} agents"
                )
            cells += [Cell(spec.id, entry.split, s, n) for s in chosen]
    return data.version, tuple(cells)


def draw_seed(secret: bytes, team: str, challenge_id: str, cell: Cell, draw: int = 0) -> int:
    """The ``draw``-th seed of ``cell`` for ``team``'s challenge ``challenge_id``."""
    message = json.dumps(
        [team, challenge_id, cell.task, cell.split, cell.scene, cell.n_agents, draw]
    ).encode()
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    low, high = SEED_POOL
    return low + int.from_bytes(digest[:8], "big") % (high - low)


def draw_episodes(
    secret: bytes, team: str, challenge_id: str, cells: tuple[Cell, ...]
) -> tuple[ChallengeEpisode, ...]:
    """One episode per cell, with the first drawn seed whose episode sets up."""
    episodes = []
    for cell in cells:
        for draw in range(MAX_DRAWS):
            seed = draw_seed(secret, team, challenge_id, cell, draw)
            if _sets_up(cell.task, cell.scene, cell.n_agents, seed, cell.split):
                episodes.append(ChallengeEpisode(cell.task, cell.scene, seed, cell.n_agents))
                break
        else:
            raise ValueError(f"no seed of {MAX_DRAWS} draws sets up cell {cell}")
    return tuple(episodes)


def new_challenge_id() -> str:
    """A fresh, unguessable challenge id (URL-safe)."""
    return "ch-" + secrets.token_urlsafe(12)


def issue_challenge(
    secret: bytes,
    team: str,
    suite: str,
    *,
    now: datetime,
    lifetime: timedelta,
    scenes: int,
    challenge_id: str | None = None,
) -> Challenge:
    """A challenge of the hidden-seed ``suite`` for ``team``, expiring ``lifetime`` after
    ``now`` (timezone-aware)."""
    if now.tzinfo is None:
        raise ValueError("now: give a timezone-aware datetime")
    if lifetime <= timedelta(0):
        raise ValueError(f"lifetime: {lifetime} must be positive")
    version, cells = suite_cells(suite, scenes)
    challenge_id = challenge_id or new_challenge_id()
    return Challenge(
        id=challenge_id,
        suite=suite,
        suite_version=version,
        team=team,
        expires=(now + lifetime).isoformat(),
        episodes=draw_episodes(secret, team, challenge_id, cells),
    )
