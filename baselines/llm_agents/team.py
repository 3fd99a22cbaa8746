"""The ``llm_agents`` team: every agent is an LLM that picks its own next skill.

Each agent keeps its own short history (last actions and their results) and the objects it knows
(named by the instruction, seen, or named in a message it received), each by a short handle
(:mod:`baselines.llm_agents.handles`: ``Fridge``, ``Cabinet_2``) instead of its objectId. It is
prompted with ``prompts/llm_agents_v3.txt``: the part above the ``---`` line (who it is, the task,
the skills) is the system message and stays the same for the whole episode, so a backend that keeps
the KV cache of a chat's leading messages encodes it once; the part below (history and what it
sees now) is the user message. It replies with one JSON object: ``{"action": ..., "say": {"to":
..., "text": ...}}``. All deciding agents go to the LLM in one batched call; handles in the
action and in the message text are written back as objectIds before the environment reads them.

Constrained (the default, ``llm.constrained=true``): each reply is decoded under
:func:`decision_schema`, built at that moment from the agent's skills (its capability profile,
less ``pickup`` while it holds something and ``put`` while it holds nothing), the handles it
knows and, when messages are delivered, its valid recipients; so every reply is a valid action.
A generation cut at ``max_tokens`` keeps its action if the action was complete and drops the
unfinished message (counted in ``llm/truncated_rate``; without a complete action it is a parse
failure too). A reply that was not decoded under the schema (a server that refused it, or one
that accepted it and returned text the schema rejects) goes to the free-form parser and is
counted in ``llm/fallback_rate``.

Free-form (``llm.constrained=false``, the ablation): the reply is parsed by
:func:`extract_action`: its JSON ``action``, else the first line that parses in the action
grammar, else a skill word followed by a visible handle or type name. A reply with none of these
is a counted parse failure (``llm/parse_fail_rate``) and the agent explores instead. A rule-based
comm module adds ``| say all: found <id>`` when the agent first sees an object the instruction
names and the LLM chose not to speak.
"""

from __future__ import annotations

import functools
import json
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from baselines.llm_agents.handles import Handles
from baselines.llm_agents.memory import AgentMemory
from baselines.llm_support import LLMTeam, constrained_default, load_prompt
from benchmark.env.grammar import ParseError, parse_action
from benchmark.env.messaging import OBJECT_ID
from benchmark.env.views import TaskInfo
from benchmark.llm import Constraint, ConstraintError, Generation, Sampling
from benchmark.skills import action_menu, is_targeted, plain_skills, skill_names
from benchmark.tasks.goals import parse_clause
from benchmark.teamkit import type_of_id

HISTORY = 4
MAX_SEEN = 10  # nearest visible objects shown in the prompt (CPU prompts must stay short)
FALLBACK = "explore"
MESSAGE_CHARS = 32  # longest message text the decision schema allows
# Printable ASCII without '"' and '\\': message text needs no JSON escapes.
_TEXT_CHARS = r"[ -!#-\[\]-~]"
SAY_HINT = 'To message teammates add "say": {{"to": "<{recipients}>", "text": "<short message>"}}.'


def compact_observation(obs: dict[str, Any], names: Handles) -> str:
    """The parts of an observation the prompt needs, objects by handle: what the agent holds,
    the nearest objects in sight, the messages it received."""
    short = names.shorten
    seen = sorted(obs["visible"], key=lambda o: float(o["distance"]))[:MAX_SEEN]
    lines = [f"You hold: {short(obs['holding']) if obs['holding'] else 'nothing'}."]
    if obs["last_action"]:
        result = "ok" if obs["last_success"] else short(obs["feedback"])
        lines.append(f"Last: {short(obs['last_action'])} -> {result}")
    objects = [short(o["objectId"]) + (f" [{o['state']}]" if o["state"] else "") for o in seen]
    lines.append("You see: " + (", ".join(objects) or "nothing"))
    lines += [f"{m['sender']} says: {short(m['text'])}" for m in obs["messages"]]
    return "\n".join(lines)


def decision_schema(
    skills: Sequence[str],
    objects: Sequence[str],
    recipients: Sequence[str] = (),
    message_chars: int = MESSAGE_CHARS,
) -> dict[str, Any]:
    """The JSON schema of one decision: ``action`` is a targeted skill of ``skills`` on one of
    ``objects``, or a plain skill of ``skills``; ``say`` (optional, only with ``recipients``)
    is a message of at most ``message_chars`` printable characters to one recipient.

    With no objects the actions are the plain skills; with no action at all this raises
    :class:`~benchmark.llm.base.ConstraintError`."""
    unknown = sorted(set(skills) - set(skill_names()))
    if unknown:
        raise ConstraintError(
            f"decision schema: unknown skills {unknown}; valid: {list(skill_names())}"
        )
    actions = [f"{s} {o}" for s in skills if is_targeted(s) for o in objects]
    actions += [s for s in skills if not is_targeted(s)]
    if not actions:
        raise ConstraintError(
            f"decision schema: no valid action (skills {list(skills)}, {len(objects)} objects)"
        )
    properties: dict[str, Any] = {"action": {"enum": list(dict.fromkeys(actions))}}
    if recipients:
        properties["say"] = {
            "type": "object",
            "properties": {
                "to": {"enum": list(recipients)},
                "text": {"type": "string", "pattern": f"^{_TEXT_CHARS}{{1,{message_chars}}}$"},
            },
            "required": ["to", "text"],
            "additionalProperties": False,
        }
    return {
        "type": "object",
        "properties": properties,
        "required": ["action"],
        "additionalProperties": False,
    }


_ACTION_HEAD = re.compile(r'^\s*\{\s*"action"\s*:\s*"([^"\\]*)"')
_DECISION_START = '{"action":"'


def _starts_a_decision(text: str) -> bool:
    """Whether ``text`` begins the way every decision the schema allows begins (whatever the
    whitespace a backend puts between JSON tokens)."""
    head = re.sub(r"\s+", "", text[:32])[: len(_DECISION_START)]
    return _DECISION_START.startswith(head)


def read_decision(text: str, schema: Mapping[str, Any], truncated: bool = False) -> str | None:
    """The action line (``<action> [| say <to>: <text>]``) of a reply that ``schema`` accepts,
    else None. With ``truncated`` a reply cut after a complete action keeps that action (its
    unfinished message is dropped)."""
    props = schema["properties"]
    actions = set(props["action"]["enum"])
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        head = _ACTION_HEAD.match(text) if truncated else None
        return head.group(1) if head and head.group(1) in actions else None
    if not isinstance(value, dict) or value.get("action") not in actions:
        return None
    if set(value) - set(props):
        return None
    say = value.get("say")
    if say is None:
        return value["action"]
    rule = props["say"]["properties"]
    text_ok = isinstance(say, dict) and isinstance(say.get("text"), str)
    if not text_ok or say.get("to") not in rule["to"]["enum"]:
        return None
    if not re.fullmatch(rule["text"]["pattern"].strip("^$"), say["text"]):
        return None
    return f"{value['action']} | say {say['to']}: {say['text']}"


@functools.cache
def _skill_word(skills: tuple[str, ...]) -> re.Pattern[str]:
    """A skill word of ``skills`` in prose, with the object word that follows it."""
    return re.compile(
        r"\b(" + "|".join(map(re.escape, skills)) + r")\b"
        r"(?:\s+(?:to|the|into|in|on|at)\b)*\s*([A-Za-z][\w|.+-]*)?",
        re.IGNORECASE,
    )


def _json_action(text: str) -> str | None:
    """The ``action`` (and ``say``) of the first JSON object in ``text`` that is an action."""
    for m in re.finditer(r"\{", text):
        try:
            value, _ = json.JSONDecoder().raw_decode(text[m.start() :])
        except json.JSONDecodeError:
            continue
        if not isinstance(value, dict) or not isinstance(value.get("action"), str):
            continue
        line = value["action"].strip()
        say = value.get("say")
        if isinstance(say, dict) and isinstance(say.get("to"), str):
            line += f" | say {say['to']}: {str(say.get('text', '')).strip()}"
        try:
            parse_action(line)
        except ParseError:
            continue
        return line
    return None


def extract_action(text: str, visible: list[str]) -> str | None:
    """The action in a free-form LLM reply: a JSON object's ``action`` that parses in the
    grammar, else the first line that parses, else the first skill word followed by one of the
    ``visible`` names (handles or objectIds) or their type (``pickup the apple``). None if the
    reply holds no usable action."""
    found = _json_action(text)
    if found is not None:
        return found
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
    for name in visible:
        by_type.setdefault(re.sub(r"_\d+$", "", type_of_id(name)).lower(), name)
    plain = plain_skills()
    for m in _skill_word(skill_names()).finditer(text):
        skill, word = m.group(1).lower(), (m.group(2) or "")
        if skill in plain:
            return skill
        target = word if word in visible else by_type.get(word.lower().rstrip(".,;:!"))
        if target is not None:
            return f"{skill} {target}"
    return None


class LLMAgentsTeam(LLMTeam):
    """Decentralised LLM agents (one prompt per agent per decision, batched)."""

    def __init__(
        self,
        llm: dict[str, Any] | None = None,
        prompt: str = "llm_agents_v3",
        max_tokens: int = 64,
        temperature: float = 0.0,
        seed: int = 0,
        constrained: bool | None = None,
        message_chars: int = MESSAGE_CHARS,
    ) -> None:
        self.llm_config = llm
        template = load_prompt(prompt)
        if template.count("\n---\n") != 1:
            raise ValueError(
                f"prompt {prompt!r}: needs one '---' line between its system part (fixed for "
                "the episode) and its user part (each decision)"
            )
        self.system, self.user = template.split("\n---\n")
        # A template whose user part asks for {memory} shows the agent's memory
        # (baselines.llm_agents.memory) instead of its recent history and current observation.
        self.uses_memory = "{memory}" in self.user
        self.sampling = Sampling(max_tokens=max_tokens, temperature=temperature, seed=seed)
        self.constrained = constrained_default(llm, constrained)
        self.message_chars = message_chars

    def start(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        """The agents' memories at the start of an episode (no LLM needed: a demonstration
        renders prompts with them)."""
        self.agents = agent_ids
        self.instruction = task_info.instruction
        self.cannot = {a: set(task_info.cannot.get(a, ())) for a in agent_ids}
        self.comm = bool(task_info.comm)
        self.history = {a: deque(maxlen=HISTORY) for a in agent_ids}
        self.announced: dict[str, set[str]] = {a: set() for a in agent_ids}
        self.names = {a: Handles() for a in agent_ids}
        for a in agent_ids:
            self.names[a].learn_in(self.instruction)
        goal = [parse_clause(text) for text in task_info.goal]
        self.memory = {a: AgentMemory(a, goal, self.names[a]) for a in agent_ids}

    def _learn(self, name: str, obs: dict[str, Any]) -> None:
        names = self.names[name]
        for o in obs["visible"]:
            names.learn(o["objectId"])
        for m in obs["messages"]:
            names.learn_in(m["text"])
        if obs["holding"]:
            names.learn(obs["holding"])

    def observe(self, name: str, obs: dict[str, Any]) -> None:
        """Take in a deciding agent's observation: the objects it learns of, and the result of
        its last action into its history."""
        self._learn(name, obs)
        if self.uses_memory:
            self.memory[name].observe(obs)
        if obs["last_action"]:
            short = self.names[name].shorten
            result = "ok" if obs["last_success"] else f"failed: {short(obs['feedback'])}"
            self.history[name].append(f"{short(obs['last_action'])} -> {result}")

    def recipients(self, name: str) -> list[str]:
        """Whom ``name`` may message (none when messages are not delivered)."""
        return ["all", *(a for a in self.agents if a != name)] if self.comm else []

    def constraint(self, name: str, obs: dict[str, Any]) -> Constraint:
        """The decision schema of ``name`` now (see the module docstring)."""
        drop = self.cannot[name] | ({"pickup"} if obs["holding"] else {"put"})
        skills = [s for s in skill_names() if s not in drop]
        schema = decision_schema(
            skills, self.names[name].handles(), self.recipients(name), self.message_chars
        )
        return Constraint(schema, "decision")

    def chat(self, name: str, obs: dict[str, Any]) -> list[dict[str, str]]:
        """The prompt of ``name``'s decision now: the episode's fixed system message, then this
        decision's user message."""
        others = self.recipients(name)
        system = self.system.format(
            name=name,
            n_agents=len(self.agents),
            agents=", ".join(self.agents),
            instruction=self.names[name].shorten(self.instruction),
            say=SAY_HINT.format(recipients="|".join(others)) if others else "",
            actions=action_menu(),
        )
        if self.uses_memory:
            user = self.user.format(memory=self.memory[name].view())
        else:
            user = self.user.format(
                history="\n".join(self.history[name]) or "(none)",
                observation=compact_observation(obs, self.names[name]),
            )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def acted(self, name: str, action: str) -> None:
        """Take in the action ``name`` decided on (objectIds, with its message): its memory
        learns the containers it opens and the objects it claims (templates with ``{memory}``;
        the others keep no memory, so their handles stay as they were)."""
        if self.uses_memory:
            self.memory[name].acted(action)

    def reply_for(self, name: str, action: str) -> str | None:
        """The JSON reply that means ``action`` (an environment action, objectIds) for ``name``:
        what a demonstration teaches; None when it names an object ``name`` has no handle for."""
        names = self.names[name]
        head, _, say = (part.strip() for part in action.partition("| say"))
        if any(oid not in names.by_id for oid in OBJECT_ID.findall(action)):
            return None
        value: dict[str, Any] = {"action": names.shorten(head)}
        to, sep, text = say.partition(":")
        if sep and to.strip():
            value["say"] = {"to": to.strip(), "text": names.shorten(text.strip())}
        return json.dumps(value)

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

    def _read(self, reply: Generation, constraint: Constraint | None, visible: list[str]) -> str:
        """The action line of ``reply`` (in handles); counts parse failures, fallbacks and
        truncations."""
        truncated = reply.finish_reason == "length"
        fallback = False
        if constraint is None:
            line = extract_action(reply.text, visible)
        elif reply.constrained:
            line = read_decision(reply.text, constraint.schema, truncated)
            # A reply the schema rejects, complete or not even begun like a decision: the backend
            # accepted the schema but did not decode under it. A decision cut before its action
            # was complete is a truncation only (its partial text holds no action to guess).
            if line is None and not (truncated and _starts_a_decision(reply.text)):
                fallback, line = True, extract_action(reply.text, visible)
        else:  # the backend could not apply the schema (a server that refused it)
            fallback, line = True, extract_action(reply.text, visible)
        self.meter.parse(line is not None, fallback=fallback, truncated=truncated)
        return line or FALLBACK

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        deciding = [a for a in self.agents if observations[a]["needs_decision"]]
        if not deciding:
            return {}
        for a in deciding:
            self.observe(a, observations[a])
        constraints: list[Constraint | None] = [
            self.constraint(a, observations[a]) if self.constrained else None for a in deciding
        ]
        # By keyword, one per chat: a batched rollout passes per-chat arguments through.
        self.chats = {a: self.chat(a, observations[a]) for a in deciding}
        replies = self.llm.generate(
            list(self.chats.values()),
            self.sampling,
            constraints=constraints,
        )
        self.replies = dict(zip(deciding, replies, strict=True))  # the chats' replies
        actions = {}
        for a, reply, c in zip(deciding, replies, constraints, strict=True):
            names = self.names[a]
            visible = [names.shorten(o["objectId"]) for o in observations[a]["visible"]]
            line = names.expand(self._read(reply, c, visible))
            actions[a] = self._comm(a, observations[a], line)
            self.acted(a, actions[a])
        return actions
