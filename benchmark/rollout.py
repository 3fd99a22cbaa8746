"""Run one episode of a team in a ``CollabEnv``: the one episode loop every runner, trainer and
test uses; and the same loop re-run on some agents of a recorded episode, to check that a
deterministic team played them (:func:`rerun_seats`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmark.agents import Team
from benchmark.env.collab_env import CollabEnv, TickHook
from benchmark.env.replay import start_from_trace


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


@dataclass(frozen=True)
class Departure:
    """The first decision where a re-run team chose otherwise than the trace records.

    Attributes:
        agent: the agent that decided.
        tick: the tick of the decision.
        recorded: the action text the trace records.
        rerun: the action text the team chose.
    """

    agent: str
    tick: int
    recorded: str
    rerun: str


def _text(action: Any) -> str:
    # As the env records an action that is not text.
    return action if isinstance(action, str) else repr(action)


def rerun_seats(trace: dict[str, Any], team: Team, agents: Sequence[str]) -> Departure | None:
    """Replay ``trace`` with ``team`` playing ``agents`` again, as a member of a mixed team
    plays them in :func:`run_episode`: reset on those agents with the episode's task info, given
    their observations at every step and their rewards after it, while the environment steps
    with the trace's recorded actions of every agent. Returns the first decision of those agents
    where the team's action differs from the trace's, or None when it chose every one. Only a
    deterministic team (:attr:`~benchmark.agents.Team.deterministic`) can be held to this.
    ValueError when ``agents`` are not agents of the episode."""
    env, obs = start_from_trace(trace)
    seats = list(agents)
    strangers = [a for a in seats if a not in env.possible_agents]
    if not seats or strangers:
        raise ValueError(f"agents {seats} are not agents of the episode {env.possible_agents}")
    team.reset(seats, env.task_info())
    for step in trace["decisions"]:
        if not env.agents:
            break
        recorded = step["actions"]
        chosen = team.act({a: obs[a] for a in seats})
        for agent in seats:
            if not obs[agent]["needs_decision"]:
                continue
            mine, theirs = _text(chosen.get(agent, "")), _text(recorded.get(agent, ""))
            if mine != theirs:
                return Departure(agent, env.tick, theirs, mine)
        obs, rewards, _, _, _ = env.step(recorded)
        team.rewarded({a: rewards[a] for a in seats if a in rewards})
    return None
