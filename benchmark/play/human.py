"""The member of a mixed team whose agents people play: their decisions come from form posts."""

from __future__ import annotations

from typing import Any

from benchmark.agents import Team
from benchmark.env.views import TaskInfo

LABEL = "human"  # how traces and rows name the member


class HumanMember(Team):
    """Acts for its agents with the decisions people posted (:attr:`posted`, agent -> action
    text), set by the play session before each step; a deciding agent with no post is an error
    (the session steps only once every deciding seat has posted)."""

    def __init__(self) -> None:
        self.agents: list[str] = []
        self.posted: dict[str, str] = {}

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.agents = list(agent_ids)
        self.posted = {}

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        deciding = [a for a in self.agents if observations[a]["needs_decision"]]
        missing = [a for a in deciding if a not in self.posted]
        if missing:
            raise RuntimeError(f"no decision posted for {missing}: the step must wait for them")
        return {a: self.posted[a] for a in deciding}
