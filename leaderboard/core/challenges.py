"""Challenges of the hidden-seed test track: the same task x scene cells for every team, seeds
drawn from a hidden pool with the server's secret.

A hidden-seed suite (``configs/suite/test.yaml``: every entry's seed list is empty) has fixed
*cells*: for each entry, each team size it lists and each of its first ``scenes`` eligible
scenes of the entry's split (the task's scene order) where the episode can be set up, or the
scenes the entry pins. A challenge gives every cell one seed, ``HMAC-SHA256(secret, [team,
challenge id, cell, draw])`` mapped into :data:`SEED_POOL`; a seed whose episode (or its
one-agent reference) cannot be set up is drawn again (``draw`` + 1). So a team cannot predict
its seeds, two teams (or two challenges) get different ones, and the same inputs always give the
same challenge.

A suite with a focal seat (``focal``: the cross-play and human tracks) also gets one partner per
cell, drawn the same way from the server's partner pool (:func:`partner_pool`: members of a
``configs/partners`` population that verification can re-run on the partner's agents, because
their play is a function of the episode: :attr:`benchmark.agents.Team.deterministic`).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from benchmark.agents import make_team, team_class
from benchmark.results.challenge import PARTNER_FIELDS, Challenge, ChallengeEpisode, Partner
from benchmark.results.crossplay import load_population
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
        eligible = spec.eligible_scenes(entry.split)
        for n in entry.n_agents:
            if entry.scenes:  # pinned: each must set up
                chosen = list(entry.scenes)
                for s in chosen:
                    if s not in eligible or not _sets_up(spec.id, s, n, PROBE_SEED, entry.split):
                        raise ValueError(
                            f"suite {suite!r} entry {k}: task {spec.id} does not set up in the "
                            f"scene it pins, {s}, of split {entry.split!r} with {n} agents"
                        )
            else:
                setting_up = [
                    s for s in eligible if _sets_up(spec.id, s, n, PROBE_SEED, entry.split)
                ]
                chosen = setting_up[:scenes]
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


def replay_problem(member: Mapping[str, Any]) -> str | None:
    """Why verification could not re-run a population member on a trace's agents (None: it
    can): it must be a registered deterministic team with constructor arguments, no LLM."""
    extra = sorted(set(member) - set(PARTNER_FIELDS))
    if extra:
        return f"it sets {extra}; a partner is a team and its kwargs only (no LLM)"
    baseline, kwargs = member.get("baseline"), member.get("kwargs") or {}
    try:
        cls = team_class(str(baseline))
    except ValueError as err:
        return str(err)
    if not cls.deterministic:
        return f"team {baseline!r} does not play deterministically (Team.deterministic)"
    try:
        make_team(str(baseline), **kwargs).close()
    except (TypeError, ValueError) as err:
        return f"its kwargs do not build team {baseline!r}: {err}"
    return None


def partner_pool(population: str, labels: Sequence[str] = ()) -> tuple[Partner, ...]:
    """The partners the server assigns: the members of partner population ``population``
    (``configs/partners/<name>.yaml``) that ``labels`` names, or, with no labels, every member
    verification can re-run. ValueError naming a label the population lacks, a named member
    that cannot be re-run (and why), or a pool left empty."""
    data = load_population(population)
    members = {m["label"]: m for m in data["members"]}
    where = f"partner population {data['name']!r} {data['version']}"
    missing = [label for label in labels if label not in members]
    if missing:
        raise ValueError(f"{where} has no member {missing}; its members are {list(members)}")
    chosen = []
    for label in labels or members:
        problem = replay_problem(members[label])
        if problem is None:
            chosen.append(
                Partner(label, members[label]["baseline"], members[label].get("kwargs") or {})
            )
        elif labels:
            raise ValueError(f"{where}: member {label!r} cannot be re-run on replay: {problem}")
    if not chosen:
        raise ValueError(f"{where}: no member can be re-run on replay")
    return tuple(chosen)


def draw_partner(
    secret: bytes, team: str, challenge_id: str, cell: Cell, partners: Sequence[Partner]
) -> Partner:
    """The partner of ``cell`` in ``team``'s challenge ``challenge_id``."""
    message = json.dumps(
        [team, challenge_id, cell.task, cell.split, cell.scene, cell.n_agents, "partner"]
    ).encode()
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    return partners[int.from_bytes(digest[:8], "big") % len(partners)]


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
    partners: Sequence[Partner] = (),
) -> Challenge:
    """A challenge of the hidden-seed ``suite`` for ``team``, expiring ``lifetime`` after
    ``now`` (timezone-aware); on a suite with a focal seat each episode gets one of
    ``partners`` (:func:`partner_pool`), which only such a suite takes."""
    if now.tzinfo is None:
        raise ValueError("now: give a timezone-aware datetime")
    if lifetime <= timedelta(0):
        raise ValueError(f"lifetime: {lifetime} must be positive")
    focal = load_suite(suite).focal
    if (focal is None) != (not partners):
        raise ValueError(
            f"suite {suite!r} has a focal seat: give the partners to assign"
            if focal is not None
            else f"suite {suite!r} has no focal seat: it is assigned no partners"
        )
    version, cells = suite_cells(suite, scenes)
    challenge_id = challenge_id or new_challenge_id()
    episodes = draw_episodes(secret, team, challenge_id, cells)
    if partners:
        episodes = tuple(
            replace(e, partner=draw_partner(secret, team, challenge_id, cell, partners))
            for e, cell in zip(episodes, cells, strict=True)
        )
    return Challenge(
        id=challenge_id,
        suite=suite,
        suite_version=version,
        team=team,
        expires=(now + lifetime).isoformat(),
        episodes=episodes,
    )
