"""Run one episode of a team in a ``CollabEnv``: the loop every runner and test uses."""

from __future__ import annotations

from typing import Any

from benchmark.agents import Team
from benchmark.env.collab_env import CollabEnv


def run_episode(env: CollabEnv, team: Team, seed: int | None = None) -> dict[str, Any]:
    """Reset ``env`` (with ``seed`` if given), let ``team`` act until the episode ends, and
    return the episode's trace (see :mod:`benchmark.env.trace`)."""
    obs, _ = env.reset(seed=seed)
    team.reset(list(env.possible_agents), env.task_info())
    infos: dict[str, Any] = {}
    while env.agents:
        actions = team.act(obs)
        obs, _, _, _, infos = env.step(actions)
    return next(iter(infos.values()))["trace"]
