"""The ``gold_planner`` team: ``llm_planner``'s executor given the gold decomposition.

The plan is not an LLM's: it is the ``oracle``'s. At reset the oracle plays the same episode
(task, floor plan, seed, agents) in a twin environment with full observability, and its
successful interactions (``pickup``, ``put``, ``open``, ``toggle_off``... and the joint
``lift``, which an LLM's plan cannot schedule), in the order they
happened, each after the same agent's previous one, become the subtasks, assigned to the agent
that did them (:class:`PlanRecorder`, which also writes the planner's demonstrations). Then
``llm_planner``'s executor carries them out under the episode's own observability, exactly as it
carries out an LLM's plan, and never re-plans.

Beside ``llm_planner`` it separates the two halves of planning: a plan known to be right and
complete (when the oracle solved the episode) against what the executor makes of it. The plan is
scored against the checklist like any team's (``plan/*``), so its coverage is the oracle's.
"""

from __future__ import annotations

from typing import Any

from baselines.llm_planner import LLMPlannerTeam
from baselines.oracle import OracleTeam
from benchmark.agents import Team
from benchmark.env import make_env
from benchmark.env.views import TaskInfo
from benchmark.rollout import run_episode
from benchmark.skills import joint_skills, plan_skills
from benchmark.tasks.decompose import Decomposition, Subtask

MAX_SUBTASKS = 64  # the oracle's whole episode, not an LLM reply's budget


class PlanRecorder(Team):
    """Plays ``teacher`` and records the objects the team saw, in the order it saw them."""

    def __init__(self, teacher: Team, skills: tuple[str, ...] | None = None) -> None:
        self.teacher = teacher
        self.skills = plan_skills() if skills is None else skills

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.teacher.reset(agent_ids, task_info)
        self.task_info = task_info
        self.seen: dict[str, None] = {}

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        for obs in observations.values():
            for o in obs["visible"]:
                self.seen.setdefault(o["objectId"])
        return self.teacher.act(observations)

    def rewarded(self, rewards: dict[str, float]) -> None:
        self.teacher.rewarded(rewards)

    def close(self) -> None:
        self.teacher.close()

    def plan(self, trace: dict[str, Any], max_subtasks: int) -> list[dict[str, Any]]:
        """The episode's successful interactions (``trace["skills"]``) on seen objects as a
        plan of at most ``max_subtasks`` subtasks."""
        items: list[dict[str, Any]] = []
        last_of: dict[str, str] = {}
        for record in trace["skills"]:
            agent, skill, target = record["agent"], record["skill"], record["target"]
            if not record["success"] or skill not in self.skills or target not in self.seen:
                continue
            if len(items) == max_subtasks:
                break
            sid = f"s{len(items) + 1}"
            after = [last_of[agent]] if agent in last_of else []
            items.append(
                {"id": sid, "agent": agent, "skill": skill, "target": target, "after": after}
            )
            last_of[agent] = sid
        return items


class GoldPlanTeam(LLMPlannerTeam):
    """The oracle's plan, carried out by ``llm_planner``'s executor."""

    def __init__(self, max_subtasks: int = MAX_SUBTASKS, failures_before_replan: int = 2) -> None:
        super().__init__(
            llm=None,
            max_replans=0,
            max_subtasks=max_subtasks,
            failures_before_replan=failures_before_replan,
        )

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.start(agent_ids, task_info)
        self.decomposition = gold_plan(task_info, self.max_subtasks)
        self.replans = 0  # the plan is in place: act() does not ask for one

    def _replan(self) -> None:
        return None  # never: the executor keeps the gold plan

    def metrics(self) -> dict[str, float]:
        return {"plan/replans": 0, "plan/subtasks": len(self.decomposition.subtasks)}


def gold_plan(info: TaskInfo, max_subtasks: int = MAX_SUBTASKS) -> Decomposition:
    """The oracle's successful interactions in the episode ``info`` describes, as a plan."""
    if info.scene is None:
        raise ValueError("the gold plan replays the episode's floor plan: TaskInfo.scene is unset")
    twin = make_env(
        info.task,
        scene=info.scene,
        n_agents=info.n_agents,
        seed=info.seed,
        observability="full",
        comm=info.comm,
        action_level=info.action_level,
    )
    recorder = PlanRecorder(OracleTeam(), skills=plan_skills() + joint_skills())
    try:
        trace = run_episode(twin, recorder, seed=info.seed)
    finally:
        recorder.close()
    items: list[dict[str, Any]] = recorder.plan(trace, max_subtasks)
    subtasks = [
        Subtask(i["id"], i["skill"], i["target"], tuple(i["after"]), i["agent"]) for i in items
    ]
    return Decomposition(ok=bool(subtasks), subtasks=subtasks, raw="oracle")
