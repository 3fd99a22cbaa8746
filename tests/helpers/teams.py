"""Teams used only by tests (named as test doubles)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from baselines.oracle.team import OracleTeam
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


class DyingTeamForTests(OracleTeam):
    """The oracle, except that in the episodes of ``task`` its worker process dies after
    ``after`` decisions: a real worker death. ``how="sigkill"``: the process sends itself
    SIGKILL, as the OS does; ``how="wait"``: it waits (at most ``wait_s`` seconds) to be killed
    from outside, e.g. by Ray's memory monitor, holding ``hoard_mb`` MiB more than it needs.
    Each episode dies ``times`` times (counted in files under ``marker_dir``, which every worker
    shares), then plays on. It never kills the process ``driver_pid`` (the test's own): there
    it raises instead."""

    def __init__(
        self,
        task: str,
        marker_dir: str,
        driver_pid: int,
        times: int = 1,
        after: int = 2,
        how: str = "sigkill",
        wait_s: float = 60.0,
        hoard_mb: int = 0,
    ) -> None:
        self.hoard_mb = hoard_mb
        self.task, self.times, self.after, self.how, self.wait_s = task, times, after, how, wait_s
        self.marker_dir, self.driver_pid = Path(marker_dir), driver_pid

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        super().reset(agent_ids, task_info)
        self.decisions = 0
        self.doomed = task_info.task == self.task
        self.episode = f"{task_info.task}-s{task_info.seed}"
        self.marker_dir.mkdir(parents=True, exist_ok=True)

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        self.decisions += 1
        deaths = len(list(self.marker_dir.glob(f"{self.episode}.death*")))
        if self.doomed and self.decisions > self.after and deaths < self.times:
            if os.getpid() == self.driver_pid:
                raise RuntimeError("DyingTeamForTests refuses to kill the test's own process")
            (self.marker_dir / f"{self.episode}.death{deaths}").touch()
            if self.how == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            hoard = b"\x01" * (self.hoard_mb << 20)  # written, so resident
            time.sleep(self.wait_s)
            del hoard
            raise RuntimeError(f"DyingTeamForTests was not killed within {self.wait_s} s")
        return super().act(observations)


class IdleTeamForTests(Team):
    """Waits with every agent it plays: a partner that does nothing, for mixed-team tests."""

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.agents = agent_ids
        self.steps = 0

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        self.steps += 1
        return {a: "wait" for a, o in observations.items() if o["needs_decision"]}

    def metrics(self) -> dict[str, float]:
        return {"idle/steps": float(self.steps)}
