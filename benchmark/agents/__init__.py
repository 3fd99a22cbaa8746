"""The team interface, and the registry that configs use to name teams.

A team subclasses :class:`Team`: it implements ``reset(agent_ids, task_info)`` and
``act(observations) -> actions``; ``act`` receives every agent's observation and returns action
text for the agents whose observation has ``needs_decision`` set. The optional hooks have
defaults: ``bind`` receives the LLM resources of the worker that plays the team (its backends
and, when episodes are batched, the episode's batch seat: :mod:`benchmark.llm.resources`),
``rewarded`` sees each step's rewards, ``metrics`` and ``plan`` add to the episode's result row,
``close`` releases resources. A team may be one central controller or one policy per agent.
Teams are found by name through the ``collab_bench.agents`` entry-point group
(``pyproject.toml``), or by a ``module:Class`` path, so the benchmark never imports them itself.
"""

from __future__ import annotations

import abc
import importlib
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, ClassVar

from benchmark.env.views import TaskInfo

if TYPE_CHECKING:
    from benchmark.llm.resources import LLMResources
    from benchmark.tasks.decompose import Decomposition

ENTRY_POINT_GROUP = "collab_bench.agents"


class Team(abc.ABC):
    """What the episode loop (:func:`benchmark.rollout.run_episode`) needs from a team."""

    # Whether the team's actions are a function of the episode alone: its task info and the
    # observations and rewards it is given (no LLM, no unseeded sampling, no wall clock, nothing
    # kept from an earlier episode). Such a team can be re-run on a trace's agents and must
    # choose the trace's actions again (:func:`benchmark.rollout.rerun_seats`): the leaderboard
    # assigns only such partners.
    deterministic: ClassVar[bool] = False

    def bind(self, resources: LLMResources) -> None:
        """Take the LLM resources of the worker that plays this team: the backends it holds,
        and the episode's batch seat when it plays several episodes at once. Called before
        ``reset``; they hold for the episodes that follow until the next ``bind``. A team
        that asks an LLM refuses to start without them; the others ignore them."""
        return None

    @abc.abstractmethod
    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        """Start an episode with these agents and this task."""

    @abc.abstractmethod
    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        """Action text for every agent whose observation has ``needs_decision`` set."""

    def rewarded(self, rewards: dict[str, float]) -> None:
        """The rewards of the step just taken, by agent (learning teams record them)."""
        return None

    def metrics(self) -> dict[str, float]:
        """Extra numbers for the episode's result row (LLM tokens, parse failures...), read
        once the episode has ended."""
        return {}

    def members(self) -> dict[str, str] | None:
        """Which member plays each agent (agent -> member label), read after ``reset``, for a
        team whose agents are played by different members (:class:`~benchmark.agents.mixed.
        MixedTeam`); None when one team plays them all. The episode's trace records it."""
        return None

    def plan(self) -> Decomposition | None:
        """The task decomposition the team made this episode, if any; the runner scores it
        against the episode's checklist."""
        return None

    def close(self) -> None:
        """Release what the team holds (models, servers); called after every episode."""
        return None


def registered_teams() -> dict[str, str]:
    """Registered team names -> ``module:Class`` paths."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def team_class(name: str) -> type[Team]:
    """The class of a team, by registered name or ``module:Class`` path; ValueError naming
    the registered teams, or why the path cannot be loaded."""
    path = name if ":" in name else registered_teams().get(name)
    if path is None:
        raise ValueError(
            f"unknown team {name!r}; registered teams are {sorted(registered_teams())}"
        )
    module, _, attr = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"cannot load team {name!r} from {path!r}: {err}") from err
    if not (isinstance(cls, type) and issubclass(cls, Team)):
        raise ValueError(f"{path} is not a subclass of benchmark.agents.Team")
    return cls


def make_team(name: str, resources: LLMResources | None = None, **kwargs: Any) -> Team:
    """Instantiate a team by registered name or ``module:Class`` path, with ``kwargs``; with
    ``resources``, bound to them (:meth:`Team.bind`)."""
    team = team_class(name)(**kwargs)
    if resources is not None:
        team.bind(resources)
    return team
