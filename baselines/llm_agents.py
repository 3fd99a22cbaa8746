"""The ``llm_agents`` team: every agent is an LLM that picks its own next skill.

Each agent keeps its own short history (last actions and their results) and the messages it
received, and is prompted with ``prompts/llm_agents_v1.txt``. The first line of the reply that
parses in the action grammar is used, else a skill word followed by a visible id or type name; a
reply with neither is a counted parse failure and the agent explores instead. A rule-based comm
module adds ``| say all: found <id>`` when the agent first sees an object the instruction names
and the LLM chose not to speak.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from baselines.llm_support import UsageMeter, load_prompt, shared_llm
from benchmark.agents import Team
from benchmark.env.grammar import ParseError, parse_action
from benchmark.env.views import TaskInfo
from benchmark.llm import Sampling
from benchmark.sim.catalog import type_of_id
from benchmark.skill_names import PLAIN_SKILLS, SKILLS

HISTORY = 4
MAX_SEEN = 10  # nearest visible objects shown in the prompt (CPU prompts must stay short)
FALLBACK = "explore"


def compact_observation(obs: dict[str, Any]) -> str:
    """The parts of an observation the prompt needs: holding, the nearest objects, messages."""
    seen = sorted(obs["visible"], key=lambda o: float(o["distance"]))[:MAX_SEEN]
    lines = [f"You hold: {obs['holding'] or 'nothing'}."]
    if obs["last_action"]:
        lines.append(
            f"Last: {obs['last_action']} -> {'ok' if obs['last_success'] else obs['feedback']}"
        )
    lines.append(
        "You see: "
        + (
            ", ".join(o["objectId"] + (f" [{o['state']}]" if o["state"] else "") for o in seen)
            or "nothing"
        )
    )
    lines += [f"{m['sender']} says: {m['text']}" for m in obs["messages"]]
    return "\n".join(lines)


_SKILL_WORD = re.compile(
    r"\b(" + "|".join(map(re.escape, SKILLS)) + r")\b"
    r"(?:\s+(?:to|the|into|in|on|at)\b)*\s*([A-Za-z][\w|.+-]*)?",
    re.IGNORECASE,
)


def extract_action(text: str, visible: list[str]) -> str | None:
    """The action in an LLM reply: the first line that parses in the grammar, else the first
    skill word followed by a visible objectId or type name (``pickup the apple``). None if the
    reply holds no usable action."""
    for line in text.splitlines():
        candidate = line.strip().lstrip("-*0123456789.) ").strip().strip("`")
        if not candidate:
            continue
        try:
            parse_action(candidate)
        except ParseError:
            continue
        return candidate
    by_type = {}
    for oid in visible:
        by_type.setdefault(type_of_id(oid).lower(), oid)
    for m in _SKILL_WORD.finditer(text):
        skill, word = m.group(1).lower(), (m.group(2) or "")
        if skill in PLAIN_SKILLS:
            return skill
        target = word if word in visible else by_type.get(word.lower().rstrip(".,;:!"))
        if target is not None:
            return f"{skill} {target}"
    return None


class LLMAgentsTeam(Team):
    """Decentralised LLM agents (one prompt per agent per decision, batched)."""

    def __init__(
        self,
        llm: dict[str, Any] | None = None,
        prompt: str = "llm_agents_v1",
        max_tokens: int = 24,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.llm_config = llm
        self.template = load_prompt(prompt)
        self.sampling = Sampling(max_tokens=max_tokens, temperature=temperature, seed=seed)

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.llm = shared_llm(self.llm_config)
        self.meter = UsageMeter(self.llm)
        self.agents = agent_ids
        self.instruction = task_info.instruction
        self.history = {a: deque(maxlen=HISTORY) for a in agent_ids}
        self.announced: dict[str, set[str]] = {a: set() for a in agent_ids}

    def _prompt(self, name: str, obs: dict[str, Any]) -> list[dict[str, str]]:
        text = self.template.format(
            name=name,
            n_agents=len(self.agents),
            agents=", ".join(self.agents),
            instruction=self.instruction,
            history="\n".join(self.history[name]) or "(none)",
            observation=compact_observation(obs),
        )
        return [{"role": "user", "content": text}]

    def _comm(self, name: str, obs: dict[str, Any], action: str) -> str:
        if "| say" in action:
            return action
        words = self.instruction.lower()
        for o in obs["visible"]:
            oid = o["objectId"]
            if oid not in self.announced[name] and type_of_id(oid).lower() in words:
                self.announced[name].add(oid)
                return f"{action} | say all: found {oid}"
        return action

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        deciding = [a for a in self.agents if observations[a]["needs_decision"]]
        if not deciding:
            return {}
        for a in deciding:
            obs = observations[a]
            if obs["last_action"]:
                result = "ok" if obs["last_success"] else f"failed: {obs['feedback']}"
                self.history[a].append(f"{obs['last_action']} -> {result}")
        replies = self.llm.generate(
            [self._prompt(a, observations[a]) for a in deciding], self.sampling
        )
        actions = {}
        for a, reply in zip(deciding, replies, strict=True):
            line = extract_action(reply.text, [o["objectId"] for o in observations[a]["visible"]])
            self.meter.parse(line is not None)
            actions[a] = self._comm(a, observations[a], line or FALLBACK)
        return actions

    def metrics(self) -> dict[str, float]:
        return self.meter.metrics()

    def close(self) -> None:
        """The LLM stays loaded for the next episode in this process."""
