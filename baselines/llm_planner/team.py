"""The ``llm_planner`` team: a central LLM decomposes and assigns, scripted controllers execute.

At the start the LLM turns the instruction and the objects the team has seen into a subtask DAG
(:mod:`benchmark.tasks.decompose`, prompt ``prompts/decompose_v2.txt``). Constrained (the default,
``llm.constrained=true``) the plan is decoded under the plan schema
(:func:`~benchmark.tasks.decompose.grammar_decompose`: known ids, each agent's permitted skills, an
acyclic order), so it parses by construction; ``scoring=true`` instead chooses each subtask by
scoring candidates (:func:`~benchmark.tasks.decompose.constrained_decompose`). Free-form
(``llm.constrained=false``) the reply is parsed and validated. A plan cut by ``max_tokens`` keeps
its complete subtasks (``llm/truncated_rate``); a plan the backend could not decode under the
schema is parsed free-form (``llm/fallback_rate``). With no object known yet there is nothing to
plan over: the LLM is not called and the agents explore.

Each agent then works through its subtasks in dependency order: it navigates to the target when
it cannot see it, then runs the skill. The LLM re-plans after repeated failures and when the team
discovers objects the instruction names, up to ``max_replans`` times. With no subtask left an
agent explores.

Under partial observability each agent knows only what it has seen or been told, while the plan
is written over what the whole team saw. So an agent whose next target it does not know explores
instead of walking to it (a walk to an unknown object fails, every time), and with messages on,
an agent that sees the target of a teammate's subtask tells that teammate once
(``found <objectId>``: the env makes an object named in a message known to its recipients).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from baselines.llm_support import LLMTeam, constrained_default, load_prompt
from benchmark.env.messaging import OBJECT_ID
from benchmark.env.views import TaskInfo
from benchmark.llm import Sampling
from benchmark.skills import is_joint
from benchmark.tasks.decompose import (
    Decomposition,
    Subtask,
    constrained_decompose,
    decompose,
    grammar_decompose,
)
from benchmark.teamkit import type_of_id


class LLMPlannerTeam(LLMTeam):
    """Decompose, allocate, execute; re-plan on failures and discoveries."""

    def __init__(
        self,
        llm: dict[str, Any] | None = None,
        prompt: str = "decompose_v2",
        constrained: bool | None = None,
        max_replans: int = 3,
        max_tokens: int = 480,
        failures_before_replan: int = 2,
        scoring: bool = False,
        max_subtasks: int = 8,
    ) -> None:
        self.llm_config = llm
        self.template = load_prompt(prompt)
        self.constrained = constrained_default(llm, constrained)
        self.scoring = scoring
        self.max_subtasks = max_subtasks
        self.max_replans = max_replans
        self.sampling = Sampling(max_tokens=max_tokens)
        self.failures_before_replan = failures_before_replan

    def start(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        """The executor's state at the start of an episode: no plan yet."""
        self.agents = agent_ids
        self.comm = bool(task_info.comm)
        self.knows: dict[str, set[str]] = {a: set() for a in agent_ids}
        self.told: set[tuple[str, str]] = set()  # (teammate, objectId) already announced
        self.instruction = task_info.instruction
        self.capabilities = dict(task_info.cannot)
        self.known: dict[str, None] = {}
        self.decomposition = Decomposition(ok=False)
        self.done: set[str] = set()
        self.futile: set[str] = set()  # actions that failed for a reason that cannot change
        self.current: dict[str, Subtask | None] = dict.fromkeys(agent_ids)
        self.failures = 0
        self.replans = -1
        self.plan_quality: dict[str, float] = {}

    # ------------------------------------------------------------------ planning
    def _relevant_new(self, observations: dict[str, dict[str, Any]]) -> bool:
        words = self.instruction.lower()
        new = False
        for obs in observations.values():
            for o in obs["visible"]:
                oid = o["objectId"]
                if oid not in self.known:
                    self.known[oid] = None
                    new = new or type_of_id(oid).lower() in words
        return new

    def _replan(self) -> None:
        objects = list(self.known)
        if not objects:
            return  # nothing to plan over yet: agents explore, the next decision tries again
        self.replans += 1
        # What every way of planning reads: the LLM, the prompt, the task and the team.
        ask = (self.llm, self.template, self.instruction, objects, self.agents, self.capabilities)
        if self.constrained and self.scoring:
            plan = constrained_decompose(*ask, self.max_subtasks)
        elif self.constrained:
            plan = grammar_decompose(*ask, self.sampling, self.max_subtasks)
        else:
            plan = decompose(*ask, self.sampling)
        fallback = self.constrained and not self.scoring and not plan.constrained
        self.meter.parse(plan.ok, fallback=fallback, truncated=plan.truncated)
        self.decomposition = plan
        self.done = set()
        self.current = dict.fromkeys(self.agents)
        self.failures = 0

    def _learn(self, observations: dict[str, dict[str, Any]]) -> None:
        """What each agent knows now: the objects it has seen or been told of."""
        for agent, obs in observations.items():
            known = self.knows.setdefault(agent, set())
            known.update(o["objectId"] for o in obs["visible"])
            for m in obs["messages"]:
                known.update(OBJECT_ID.findall(m["text"]))
            if obs["holding"]:
                known.add(obs["holding"])

    def _announce(self, agent: str, obs: dict[str, Any]) -> str:
        """`` | say <teammate>: found <id>`` for the first target of a teammate's pending
        subtask that ``agent`` sees and the teammate does not know; else nothing."""
        if not self.comm:
            return ""
        visible = {o["objectId"] for o in obs["visible"]}
        for s in self.decomposition.subtasks:
            mate = s.agent
            if (
                mate != agent
                and mate in self.knows
                and s.id not in self.done
                and s.target in visible
                and s.target not in self.knows[mate]
                and (mate, s.target) not in self.told
            ):
                self.told.add((mate, s.target))
                return f" | say {mate}: found {s.target}"
        return ""

    def _hand_over_puts(self, observations: dict[str, dict[str, Any]]) -> None:
        """After a joint lift one of the lifters holds the object, not always the one the plan
        gives its ``put`` to: a put that follows a lift goes to the lifter holding the object."""
        by_id = {s.id: s for s in self.decomposition.subtasks}
        for k, s in enumerate(self.decomposition.subtasks):
            if s.skill != "put" or s.id in self.done or observations[s.agent]["holding"]:
                continue
            lifted = {by_id[a].target for a in s.after if a in by_id and is_joint(by_id[a].skill)}
            holder = next(
                (b for b, o in observations.items() if b != s.agent and o["holding"] in lifted),
                None,
            )
            if holder is not None:
                self.decomposition.subtasks[k] = replace(s, agent=holder)
                if self.current.get(s.agent) is s:
                    self.current[s.agent] = None

    def _next_subtask(self, agent: str) -> Subtask | None:
        taken = {s.id for s in self.current.values() if s is not None}
        for s in self.decomposition.subtasks:
            if (
                s.agent == agent
                and s.id not in self.done
                and s.id not in taken
                and s.action not in self.futile
                and set(s.after) <= self.done
            ):
                return s
        return None

    # ------------------------------------------------------------------ acting
    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        discovered = self._relevant_new(observations)
        self._learn(observations)
        self._hand_over_puts(observations)
        if (
            self.replans < 0
            or (discovered and self.replans < self.max_replans)
            or (self.failures >= self.failures_before_replan and self.replans < self.max_replans)
        ):
            self._replan()
        actions = {}
        for agent in self.agents:
            obs = observations[agent]
            if not obs["needs_decision"]:
                continue
            task = self.current[agent]
            if task is not None and obs["last_action"].startswith(task.skill):
                if obs["last_success"]:
                    self.done.add(task.id)
                elif obs["failure"]["reason"] == "needs_partner":
                    pass  # a joint skill (a gold plan's lift) is tried until the partner joins
                else:
                    self.failures += 1
                    if obs["failure"]["permanent"]:
                        self.futile.add(task.action)
                task = self.current[agent] = None
            if task is None:
                task = self.current[agent] = self._next_subtask(agent)
            visible = {o["objectId"] for o in obs["visible"]}
            if task is None:
                action = "explore"
            elif task.target not in visible and task.target not in self.knows[agent]:
                action = "explore"  # look for it: an act on an unknown object always fails
            elif (task.skill != "put" or obs["holding"]) and task.target not in visible:
                action = f"navigate {task.target}"
            else:
                action = task.action
            actions[agent] = action + self._announce(agent, obs)
        return actions

    def metrics(self) -> dict[str, float]:
        out = self.meter.metrics()
        out["plan/replans"] = max(0, self.replans)
        out["plan/subtasks"] = len(self.decomposition.subtasks)
        return out

    def plan(self) -> Decomposition | None:
        return self.decomposition
