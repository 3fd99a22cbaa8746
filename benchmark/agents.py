"""The agent interface and the registry that configs use to name agents.

A team implements ``reset(agent_ids, task_info)``, ``act(observations) -> actions`` and
``close()``; ``act`` receives every agent's observation and returns action text for the agents
whose observation has ``needs_decision`` set. A team may be one central controller or one
policy per agent. Teams are found by name through the ``collab_bench.agents`` entry-point group
(``pyproject.toml``), or by a ``module:Class`` path, so the benchmark never imports them itself.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

ENTRY_POINT_GROUP = "collab_bench.agents"


@runtime_checkable
class Team(Protocol):
    """What the environment loop needs from a team of agents."""

    def reset(self, agent_ids: list[str], task_info: dict[str, Any]) -> None: ...

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]: ...

    def close(self) -> None: ...


def registered_teams() -> dict[str, str]:
    """Registered team names -> ``module:Class`` paths."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def make_team(name: str, **kwargs: Any) -> Team:
    """Instantiate a team by registered name or ``module:Class`` path."""
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
    team = cls(**kwargs)
    if not isinstance(team, Team):
        raise ValueError(f"{path} does not implement reset/act/close")
    return team
