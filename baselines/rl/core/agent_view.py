"""What an RL policy agent reads and writes: a compact text view of its memory, and the mapping
between the short object names it uses and the environment's objectIds.

The view lists the objects the agent has seen or been told about, by short names: the object
type when the agent knows one object of that type, else ``Type_k`` in the order of discovery
(``Cabinet_1``, ``Cabinet_2``). Objects whose type the instruction names come first, then those
in sight, then by distance; at most ``max_objects``. The reply is one line in the skill grammar
with names instead of objectIds (``pickup Apple | say all: found Apple``); names in the action
and in the message are replaced by objectIds before the environment parses it, and objectIds in
received messages are shown as names. A reply that names no known object reaches the
environment as written and fails there with feedback.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any

from benchmark.env.messaging import OBJECT_ID
from benchmark.teamkit import type_of_id

PROMPT_VERSION = "rl_view_v1"
_WORD = re.compile(r"[A-Za-z][A-Za-z]*(?:_\d+)?")


@dataclass
class Known:
    """One remembered object."""

    object_id: str
    type: str
    name: str
    state: str = ""
    inside: str = ""
    distance: float = 99.0
    in_sight: bool = False
    order: int = 0


class AgentView:
    """One agent's memory over an episode and its prompt text.

    Args:
        name: the agent (``agent_0``).
        agents: the whole team.
        instruction: the task instruction the agent was given.
        history: how many of its last actions (and their results) the prompt repeats.
        max_objects: how many known objects the prompt lists.
    """

    def __init__(
        self,
        name: str,
        agents: list[str],
        instruction: str,
        history: int = 2,
        max_objects: int = 8,
    ) -> None:
        self.name = name
        self.agents = agents
        self.instruction = instruction
        self.max_objects = max_objects
        self.known: dict[str, Known] = {}
        self.by_name: dict[str, str] = {}
        self.type_count: dict[str, int] = {}
        self.history: deque[str] = deque(maxlen=history)
        self.messages: list[str] = []
        self.holding = ""
        self.pending: str | None = None  # the last reply, waiting for its result
        words = instruction.lower()
        self._named_types = lambda t: t.lower() in words

    # ------------------------------------------------------------------ memory
    def _remember(self, object_id: str) -> Known:
        entry = self.known.get(object_id)
        if entry is None:
            kind = type_of_id(object_id)
            k = self.type_count.get(kind, 0) + 1
            self.type_count[kind] = k
            entry = Known(object_id, kind, f"{kind}_{k}", order=len(self.known))
            self.known[object_id] = entry
            self.by_name[entry.name] = object_id
        return entry

    def name_of(self, object_id: str) -> str:
        """The short name of a known object: its type while it is the only one of its type."""
        entry = self.known[object_id]
        return entry.type if self.type_count[entry.type] == 1 else entry.name

    def _resolve(self, word: str) -> str | None:
        if word in self.by_name:
            return self.by_name[word]
        if self.type_count.get(word) == 1:
            return self.by_name[f"{word}_1"]
        return None

    def update(self, obs: dict[str, Any]) -> None:
        """Take in one observation: what is in sight, what is held, the messages received and
        the result of the last action."""
        for entry in self.known.values():
            entry.in_sight = False
        for o in obs["visible"]:
            entry = self._remember(o["objectId"])
            entry.state, entry.inside = o["state"], o["in"]
            entry.distance, entry.in_sight = float(o["distance"]), True
        self.holding = obs["holding"]
        if self.holding:
            self._remember(self.holding)
        self.messages = []
        for m in obs["messages"]:
            for oid in OBJECT_ID.findall(m["text"]):
                self._remember(oid)
            self.messages.append(f"{m['sender']}: {self.names_in(m['text'])}")
        if self.pending is not None and obs["needs_decision"]:
            result = "ok" if obs["last_success"] else "failed"
            self.history.append(f"{self.pending} -> {result}")
            self.pending = None

    def names_in(self, text: str) -> str:
        """``text`` with known objectIds replaced by short names."""
        return OBJECT_ID.sub(
            lambda m: self.name_of(m.group(0)) if m.group(0) in self.known else m.group(0), text
        )

    # ------------------------------------------------------------------ prompt
    def _listed(self) -> list[Known]:
        ranked = sorted(
            self.known.values(),
            key=lambda e: (not self._named_types(e.type), not e.in_sight, e.distance, e.order),
        )
        return [e for e in ranked if e.object_id != self.holding][: self.max_objects]

    def prompt(self) -> str:
        """The text the policy completes with its reply."""
        lines = [
            f"{self.name} of {len(self.agents)}. Task: {self.instruction}",
            f"Holding: {self.name_of(self.holding) if self.holding else 'nothing'}.",
        ]
        lines += [f"Did: {h}" for h in self.history]
        objects = []
        for e in self._listed():
            bits = [self.name_of(e.object_id)]
            if e.state:
                bits.append(f"[{e.state}]")
            if e.in_sight:
                bits.append(f"{e.distance:.0f}m")
            objects.append(" ".join(bits))
        lines.append("Known: " + (", ".join(objects) if objects else "nothing"))
        lines += [f"From {m}" for m in self.messages]
        lines.append("Action:")
        return "\n".join(lines)

    # ------------------------------------------------------------------ replies
    def to_action(self, reply: str) -> str:
        """The environment action for a reply: its first line, names replaced by objectIds."""
        line = reply.strip().split("\n", 1)[0].strip()
        self.pending = line
        head, sep, message = line.partition("|")
        parts = head.split()
        if len(parts) == 2:
            oid = self._resolve(parts[1])
            if oid is not None:
                parts[1] = oid
        out = " ".join(parts)
        if sep:
            body = _WORD.sub(lambda m: self._resolve(m.group(0)) or m.group(0), message)
            out = f"{out} |{body}"
        return out

    def to_reply(self, action: str) -> str | None:
        """A teacher's environment action as this view's reply (objectIds as names); None when
        it names an object this agent does not know."""
        ids = OBJECT_ID.findall(action)
        if any(oid not in self.known for oid in ids):
            return None
        return self.names_in(action).strip()
