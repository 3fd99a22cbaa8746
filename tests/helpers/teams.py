"""Teams used only by tests (named as test doubles)."""

from __future__ import annotations

from typing import Any

from benchmark.agents import Team
from benchmark.env.views import TaskInfo


class CrashingTeamForTests(Team):
    """Raises on reset for seed 1 episodes of transport tasks: exercises retries and error rows."""

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        if task_info.task.startswith("transport") and task_info.instruction.startswith("Put"):
            raise RuntimeError("deliberate failure for the test")
        self.agents = agent_ids

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        return {a: "done" for a, o in observations.items() if o["needs_decision"]}

    def close(self) -> None:
        """Nothing to release."""
