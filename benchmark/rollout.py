"""Run one episode of a team in a ``CollabEnv``: the one episode loop every runner, trainer and
test uses."""

from __future__ import annotations

from typing import Any

from benchmark.agents import Team
from benchmark.env.collab_env import CollabEnv, TickHook


def run_episode(
    env: CollabEnv, team: Team, seed: int | None = None, on_tick: TickHook | None = None
) -> dict[str, Any]:
    """Reset ``env`` (with ``seed`` if given), let ``team`` act until the episode ends, and
    return the episode's trace (see :mod:`benchmark.env.trace`). The team sees every step's
    rewards (:meth:`~benchmark.agents.Team.rewarded`); ``on_tick`` sees the world after every
    tick. A mixed team's members are recorded in the trace."""
    obs, _ = env.reset(seed=seed)
    team.reset(list(env.possible_agents), env.task_info())
    members = team.members()
    if members is not None:
        env.record_members(members)
    infos: dict[str, Any] = {}
    while env.agents:
        actions = team.act(obs)
        obs, rewards, _, _, infos = env.step(actions, on_tick=on_tick)
        team.rewarded(rewards)
    return next(iter(infos.values()))["trace"]
