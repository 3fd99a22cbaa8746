"""The ``random`` team: every agent picks a random valid skill on an object it sees.

It is the lower reference: it can only succeed by chance.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmark.agents import Team
from benchmark.env.views import TaskInfo
from benchmark.skills import is_targeted, plain_skills, targeted_skills


class RandomTeam(Team):
    """Independent uniformly random skills, seeded (``seed``) for reproducible runs."""

    deterministic = True  # its generator starts from ``seed`` at every reset

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.rng = np.random.default_rng(self.seed)
        self.agents = agent_ids

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        actions = {}
        for name in self.agents:
            obs = observations[name]
            if not obs["needs_decision"]:
                continue
            seen = [o["objectId"] for o in obs["visible"]]
            choices = [s for s in targeted_skills() if seen] + [
                s for s in plain_skills() if s != "done"
            ]
            skill = choices[int(self.rng.integers(len(choices)))]
            if is_targeted(skill):
                actions[name] = f"{skill} {seen[int(self.rng.integers(len(seen)))]}"
            else:
                actions[name] = skill
        return actions

    def close(self) -> None:
        """Nothing to release."""
