"""What an LLM agent knows, kept from what it saw, heard and did, and written as its prompt.

A small model can only learn a decision from a prompt that holds what the decision depends on.
The heuristic teacher decides from a memory (:class:`baselines.heuristic.memory.Memory`):
every object it has seen and where, the containers searched (by itself or, as reported, by a
teammate), the objects teammates claimed, and what it is doing. :class:`AgentMemory` keeps the
same facts from the same inputs (the agent's observations, the messages it receives and its own
actions), and :meth:`AgentMemory.view` writes them compactly, objects by handle
(:mod:`baselines.llm_agents.handles`):

    Tick 14. You hold: nothing. Last: open Cabinet_2 -> ok
    Goal objects: Apple (in Fridge, claimed by agent_1); Tomato (in sight, in CounterTop)
    Places: Fridge (closed, searched); CounterTop (in sight)
    Not searched: Cabinet_3 (in sight, closed); Drawer (closed)
    Heard: agent_1: claim Apple

An object the goal needs (what it is about, where it wants things, the appliances and tools it
needs: :class:`~baselines.heuristic.goals.GoalReader`) is listed wherever it is, with the
receptacle it belongs in when a rearrangement says (seen ``belongs`` fields, teammates'
``home`` messages); a closed
container is listed as not searched until the agent opened it or a teammate said ``searched``
it, in sight first; objects in sight are marked. Nothing else is remembered, so the prompt stays
short.

It reads the goal, the teammates' messages (:data:`~baselines.heuristic.messages.NEWS`), the
claims' lifetime and the kinds of containers and surfaces as the teacher does, and keeps its
facts by rules of its own, for they are what the prompt shows rather than what the teacher acts
on: a claim is shown as last heard (the teacher settles two claims on one object by agent index)
and its own claims count once said (the teacher's, once chosen); every container the agent
opened counts as searched (the teacher's, those it opened to search them); a delivered object
stays marked as delivered; and each object keeps whether it is in sight and how far.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from baselines.heuristic.acting import CONTAINERS, SURFACES
from baselines.heuristic.goals import GoalReader
from baselines.heuristic.memory import CLAIM_TTL
from baselines.heuristic.messages import NEWS
from baselines.llm_agents.handles import Handles
from benchmark.teamkit import object_facts, type_of_id

MAX_UNSEARCHED = 6  # closed containers not searched that the view lists, in sight first
MAX_PLACES = 6  # other known places (destinations, surfaces in sight) the view lists
MAX_HEARD = 3  # messages of this decision the view repeats


@dataclass
class Seen:
    """One object as the agent last knew it."""

    object_id: str
    state: str = ""
    inside: str = ""
    distance: float = 99.0
    in_sight: bool = False


class AgentMemory:
    """One agent's memory over an episode (see the module docstring).

    Args:
        name: the agent (``agent_0``).
        goal: the task's goal clauses (public task information).
        handles: the agent's handles, shared with its prompt and its decision schema.
    """

    def __init__(self, name: str, goal: list[Any], handles: Handles) -> None:
        self.name = name
        self.handles = handles
        self.reader = GoalReader(goal, object_facts())
        self.seen: dict[str, Seen] = {}
        self.searched: dict[str, str] = {}  # container -> who searched it
        self.claims: dict[str, tuple[str, int]] = {}  # objectId -> (agent, tick)
        self.done: set[str] = set()  # objects a teammate said it delivered
        self.home: dict[str, str] = {}  # objectId -> the receptacle a rearrangement wants it in
        self.heard: deque[str] = deque(maxlen=MAX_HEARD)
        self.tick = 0
        self.holding = ""
        self.last = ""

    def observe(self, obs: dict[str, Any]) -> None:
        """Take in an observation: what is in sight now, what it holds, its last action's
        result, and the messages it received."""
        self.tick = int(obs["tick"])
        self.holding = obs["holding"]
        for entry in self.seen.values():
            entry.in_sight = False
        for o in obs["visible"]:
            oid = o["objectId"]
            self.handles.learn(oid)
            if o["in"]:
                self.handles.learn(o["in"])
            self.seen[oid] = Seen(oid, o["state"], o["in"], float(o["distance"]), True)
            for away in o.get("belongs", ()):  # rearrangement: this is where they belong
                self.home[away] = oid
                self.handles.learn(away)
        if obs["holding"]:
            self.handles.learn(obs["holding"])
        self.heard.clear()
        for m in obs["messages"]:
            self.handles.learn_in(m["text"])
            self.heard.append(f"{m['sender']}: {m['text']}")
            self._hear(m["sender"], m["text"])
        self.last = ""
        if obs["last_action"]:
            result = "ok" if obs["last_success"] else f"failed ({obs['failure']['reason']})"
            self.last = f"{obs['last_action']} -> {result}"

    def _hear(self, sender: str, text: str) -> None:
        m = NEWS.match(text)
        if m is None:
            return
        verb, oid, where = m.groups()
        if verb == "claim":
            self.claims[oid] = (sender, self.tick)
        elif verb == "done":
            self.done.add(oid)
        elif verb == "searched":
            self.searched.setdefault(oid, sender)
        elif verb == "found" and oid not in self.seen:
            self.seen[oid] = Seen(oid, "", where or "")
        elif verb == "home" and where:
            self.home.setdefault(oid, where)
            self.seen.setdefault(where, Seen(where))

    def acted(self, action: str) -> None:
        """Take in the agent's own decision (``<action> [| say <to>: <text>]``, objectIds): a
        container it opens is searched, and what it says it also knows."""
        head, _, say = (part.strip() for part in action.partition("| say"))
        skill, _, target = head.partition(" ")
        if skill == "open" and target:
            self.searched[target] = self.name
        text = say.partition(":")[2].strip()
        m = NEWS.match(text)
        if m is not None and m.group(1) == "claim":
            self.claims[m.group(2)] = (self.name, self.tick)

    # ------------------------------------------------------------------ the view
    def _claimed_by(self, oid: str) -> str | None:
        claim = self.claims.get(oid)
        if claim is None or claim[0] == self.name:
            return None
        agent, at = claim
        return agent if oid in self.done or self.tick - at <= CLAIM_TTL else None

    def _describe(self, oid: str, entry: Seen) -> str:
        short = self.handles.shorten
        parts = ["in sight" if entry.in_sight else ""]
        if entry.inside and type_of_id(entry.inside) != "Floor":  # the floor says nothing
            parts.append(f"in {short(entry.inside)}")
        parts.append(entry.state)
        if oid in self.home:
            parts.append(f"belongs in {short(self.home[oid])}")
        if oid in self.searched:
            parts.append("searched")
        owner = self._claimed_by(oid)
        if oid in self.done:
            parts.append(f"delivered by {owner or 'a teammate'}")
        elif owner is not None:
            parts.append(f"claimed by {owner}")
        details = ", ".join(p for p in parts if p)
        return f"{short(oid)} ({details})" if details else short(oid)

    def unsearched(self) -> list[str]:
        """Closed containers it knows and nobody searched, in sight first, then by objectId:
        the order in which the teacher takes them, so that "the first one" is a rule a
        student can read off the prompt."""
        closed = [
            oid
            for oid, e in self.seen.items()
            if type_of_id(oid) in CONTAINERS
            and "closed" in e.state.split(", ")
            and oid not in self.searched
            and self._claimed_by(oid) is None
        ]
        return sorted(closed, key=lambda o: (not self.seen[o].in_sight, o))

    def view(self) -> str:
        """The memory as prompt text (see the module docstring)."""
        short = self.handles.shorten
        holding = short(self.holding) if self.holding else "nothing"
        head = f"Tick {self.tick}. You hold: {holding}."
        lines = [head + (f" Last: {short(self.last)}" if self.last else "")]
        goal = [o for o in self.seen if self.reader.wanted(o) or o in self.home]
        goal += [o for o in self.home if o not in self.seen]  # its home known, itself not yet
        lines.append("Goal objects: " + (self._list(goal) or "none seen yet"))
        unsearched = self.unsearched()[:MAX_UNSEARCHED]
        places = [
            o
            for o, e in self.seen.items()
            if o not in goal
            and o not in unsearched
            and (
                self.reader.destination(o)
                or self.reader.ingredient(o)
                or (self.holding and e.in_sight and type_of_id(o) in SURFACES)
                or (o in self.searched and e.in_sight)
            )
        ]
        places.sort(key=lambda o: (not self.seen[o].in_sight, self.seen[o].distance, o))
        if places:
            lines.append("Places: " + self._list(places[:MAX_PLACES]))
        if unsearched:
            lines.append("Not searched: " + self._list(unsearched))
        if self.heard:
            lines.append("Heard: " + "; ".join(short(h) for h in self.heard))
        return "\n".join(lines)

    def _list(self, objects: list[str]) -> str:
        return "; ".join(self._describe(o, self.seen.get(o, Seen(o))) for o in objects)
