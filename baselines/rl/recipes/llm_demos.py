"""Demonstrations in the LLM baselines' own prompts, for supervised fine-tuning (LoRA) of the
model those baselines run on.

``llm_agents`` (teacher ``heuristic``): the heuristic team plays; at each of its decisions the
acting agent's prompt is rendered by an :class:`~baselines.llm_agents.LLMAgentsTeam` that keeps
that agent's memory (handles, history) exactly as the team would at test time, and the target is
the JSON reply meaning the heuristic's action (:meth:`~baselines.llm_agents.LLMAgentsTeam.
reply_for`). A reply its decision schema rejects (an object the agent has no handle for, a
message too long for the schema) keeps its action without the message, or is skipped and
counted.

``llm_planner`` (teacher ``oracle``): the oracle plays with full observability; its successful
interactions (``pickup``, ``put``, ``open``... in the order they happened, at most
``max_subtasks``, each after the same agent's previous one) are the plan, and the prompt is the
planner's (:func:`~benchmark.tasks.decompose.build_prompt`) over the objects the team saw during the
episode, in the order it saw them: the plan an informed planner should write. The target passes
the plan schema the planner decodes under.

``successful_only=true`` keeps only the episodes the teacher solved (the heuristic team loops in
the episodes it fails, and a loop is not worth imitating); the others are counted as dropped.
"""

from __future__ import annotations

import json
from typing import Any

from baselines.gold_planner import PlanRecorder
from baselines.llm_agents.team import LLMAgentsTeam, read_decision
from baselines.llm_support import load_prompt
from benchmark.agents import Team, make_team
from benchmark.env import CollabEnv, EnvOptions
from benchmark.env.views import TaskInfo
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode
from benchmark.tasks.decompose import build_prompt, validate

FORMATS = {"llm_agents": "heuristic", "llm_planner": "oracle"}  # format -> its teacher


def teacher_reply(
    view: LLMAgentsTeam, agent: str, schema: dict[str, Any], action: str
) -> str | None:
    """The JSON reply of ``agent`` that means the teacher's ``action`` and passes its decision
    ``schema``: with the teacher's message, else without it; None when neither passes (an
    object the agent has no handle for)."""
    for candidate in (action, action.partition("|")[0].strip()):
        reply = view.reply_for(agent, candidate)
        if reply is not None and read_decision(reply, schema) is not None:
            return reply
    return None


class AgentsDemonstrator(Team):
    """Plays ``teacher``; ``pairs`` holds (agent, chat, reply) in decision order and
    ``schemas`` the decision schema of each pair (what the learner decodes under there)."""

    def __init__(self, teacher: Team, prompt: str = "llm_agents_v3") -> None:
        self.teacher = teacher
        self.prompt = prompt

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.teacher.reset(agent_ids, task_info)
        self.view = LLMAgentsTeam(llm=None, prompt=self.prompt)
        self.view.start(agent_ids, task_info)
        self.pairs: list[tuple[str, list[dict[str, str]], str]] = []
        self.schemas: list[dict[str, Any]] = []
        self.skipped = 0

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        deciding = [a for a in observations if observations[a]["needs_decision"]]
        chats = {}
        for a in deciding:
            self.view.observe(a, observations[a])
            chats[a] = self.view.chat(a, observations[a])
        actions = self.teacher.act(observations)
        for a in deciding:
            schema = self.view.constraint(a, observations[a]).schema
            self.view.acted(a, actions.get(a, ""))
            reply = teacher_reply(self.view, a, schema, actions.get(a, ""))
            if reply is None:
                self.skipped += 1
            else:
                self.pairs.append((a, chats[a], reply))
                self.schemas.append(schema)
        return actions

    def rewarded(self, rewards: dict[str, float]) -> None:
        self.teacher.rewarded(rewards)

    def close(self) -> None:
        self.teacher.close()


def demo_env(task: str, n_agents: int, split: str, rollout: Any, full: bool) -> CollabEnv:
    options = EnvOptions(
        reward_sharing=rollout.reward_sharing,
        comm=rollout.comm,
        ambiguity=rollout.ambiguity,
        split=split,
        observability="full" if full else "partial",
    )
    return CollabEnv(task, n_agents=n_agents, options=options)


def played_env(task: str, split: str) -> CollabEnv:
    """The env of a two-agent episode as the evaluation plays it (partial observability,
    messages on, the default instruction phrasing), for DAgger and held-out decisions."""
    return CollabEnv(task, n_agents=2, options=EnvOptions(split=split))


def llm_demonstrations(cfg: Any) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Demonstrations of ``cfg.format`` (``llm_agents`` or ``llm_planner``): dicts with
    ``task``, ``seed``, ``agent``, ``chat`` (the prompt messages) and ``reply``; and the
    teacher's statistics."""
    if cfg.format not in FORMATS:
        raise ValueError(f"format={cfg.format!r} is not one of {list(FORMATS)}")
    teacher = FORMATS[cfg.format]
    if cfg.teacher != teacher:
        raise ValueError(f"format={cfg.format} learns from teacher={teacher}, not {cfg.teacher}")
    demos: list[dict[str, Any]] = []
    skipped, dropped, successes = 0, 0, []
    for k in range(cfg.episodes):
        task = cfg.tasks[k % len(cfg.tasks)]
        seed = cfg.seed_start + k
        planner = cfg.format == "llm_planner"
        env = demo_env(task, cfg.n_agents, cfg.split, cfg.rollout, full=planner)
        team: Team = (
            PlanRecorder(make_team(teacher))
            if planner
            else AgentsDemonstrator(make_team(teacher), cfg.prompt or "llm_agents_v3")
        )
        try:
            trace = run_episode(env, team, seed=seed)
        finally:
            team.close()
        successes.append(episode_metrics(trace)["SR"])
        if cfg.get("successful_only") and successes[-1] < 1:
            dropped += 1
            continue
        if planner:
            demo = plan_demo(team, trace, cfg.prompt or "decompose_v2", cfg.max_subtasks)
            if demo is None:
                skipped += 1
            else:
                demos.append({"task": task, "seed": seed, "agent": "planner", **demo})
            continue
        demos += [
            {"task": task, "seed": seed, "agent": a, "chat": chat, "reply": reply}
            for a, chat, reply in team.pairs
        ]
        skipped += team.skipped
    stats = {
        "teacher_SR": sum(successes) / len(successes),
        "demonstrations": len(demos),
        "skipped": skipped,
        "episodes_dropped": dropped,
    }
    return demos, stats


def plan_demo(
    recorder: PlanRecorder, trace: dict[str, Any], prompt: str, max_subtasks: int
) -> dict[str, Any] | None:
    """The planner's chat and the teacher's plan as its reply; None when the teacher did no
    interaction on an object the team saw."""
    info = recorder.task_info
    items = recorder.plan(trace, max_subtasks)
    if not items:
        return None
    objects = list(recorder.seen)
    capabilities = {a: list(c) for a, c in info.cannot.items()}
    checked = validate(items, set(objects), list(info.agents), capabilities)
    if not checked.ok or checked.invalid or checked.errors:
        return None  # a plan the planner's schema would not let it write
    chat = build_prompt(load_prompt(prompt), info.instruction, objects, info.agents, capabilities)
    return {"chat": chat, "reply": json.dumps(items)}
