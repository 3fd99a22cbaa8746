"""The ``heuristic`` team: decentralised scripted agents that talk.

Each agent sees only its own observations and the messages it receives. It reads the task's
goal clauses (public task information), remembers what it has seen, and:

* works on goal objects it knows about, announcing ``claim <id>`` so that others leave them alone;
* reports discoveries, ``found <id> in <receptacleId>``, and searched containers,
  ``searched <id>``, so that nobody opens the same drawer twice;
* otherwise opens closed containers it has not searched, closes them again once nothing wanted
  is left inside (a tidy housemate), and explores;
* never repeats an action that failed for a reason that cannot change (the observation's
  ``failure.permanent``): it leaves that object alone instead.

With communication off the same agents duplicate searches and chase the same objects, which is
what the comm-ablation measures.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from benchmark.agents import Team
from benchmark.env.views import TaskInfo
from benchmark.goals import HOME, Clause, parse_clause
from benchmark.sim.catalog import type_of_id as _type

SURFACES = (
    "CounterTop",
    "DiningTable",
    "SideTable",
    "Desk",
    "Dresser",
    "CoffeeTable",
    "Shelf",
    "Sofa",
    "Bed",
    "ArmChair",
    "TVStand",
)
CONTAINERS = ("Drawer", "Cabinet", "Box", "Safe", "Fridge", "Microwave", "LaundryHamper")
CLAIM_TTL = 40  # ticks after which another agent's claim is treated as abandoned
_MESSAGE = re.compile(r"^(claim|found|searched|done) (\S+)(?: in (\S+))?$")


def _index(agent: str) -> int:
    return int(agent.rsplit("_", 1)[1])


class HeuristicAgent:
    """One agent's memory and decision rules."""

    def __init__(self, name: str, goal: list[Clause], teammates: list[str]) -> None:
        self.name = name
        self.goal = goal
        self.teammates = teammates
        self.seen: dict[str, dict[str, Any]] = {}  # objectId -> last observed entry
        self.searched: set[str] = set()
        self.claims: dict[str, str] = {}  # objectId -> agent
        self.claimed_at: dict[str, int] = {}  # objectId -> tick of the claim
        self.tick = 0
        self.outbox: deque[str] = deque()
        self.reported: set[str] = set()
        self.mine: str | None = None
        self.to_close: set[str] = set()  # searched containers it opened and will close again
        self.last_action = ""  # its last action, without the message
        self.futile: set[tuple[str, str]] = set()  # (action, what it held) that cannot work
        self.avoid: set[str] = set()  # objects such an action was about

    # ------------------------------------------------------------------ perception
    def observe(self, obs: dict[str, Any]) -> None:
        self.tick = int(obs["tick"])
        for oid, at in list(self.claimed_at.items()):
            if self.tick - at > CLAIM_TTL and self.claims.get(oid) != self.name:
                del self.claims[oid], self.claimed_at[oid]
        for entry in obs["visible"]:
            oid = entry["objectId"]
            self.seen[oid] = dict(entry)
            if (self._wanted(oid) or self._destination(oid)) and oid not in self.reported:
                self.reported.add(oid)
                where = f" in {entry['in']}" if entry["in"] else ""
                self.outbox.append(f"found {oid}{where}")
        if not obs["last_success"]:
            self._failed(obs)
        for msg in obs["messages"]:
            m = _MESSAGE.match(msg["text"])
            if m is None:
                continue
            verb, oid, where = m.groups()
            if verb == "claim":
                # Two claims on one object: the lower agent index keeps it.
                mine = self.claims.get(oid) == self.name
                if not (mine and _index(self.name) < _index(msg["sender"])):
                    self.claims[oid] = msg["sender"]
                    self.claimed_at[oid] = self.tick
            elif verb == "found" and oid not in self.seen:
                self.seen[oid] = {
                    "objectId": oid,
                    "objectType": _type(oid),
                    "state": "",
                    "in": where or "",
                }
            elif verb == "searched":
                self.searched.add(oid)
            elif verb == "done":
                self.claims[oid] = msg["sender"]
                self.claimed_at[oid] = 10**9  # delivered: never expires

    def _failed(self, obs: dict[str, Any]) -> None:
        """Learn from the failure of its last action (structured, never from the text)."""
        failure = obs["failure"]
        target = self.last_action.partition(" ")[2]
        if failure["reason"] == "held_by_other" and target and failure["agent"]:
            self.claims[target] = failure["agent"]
            self.claimed_at[target] = self.tick
        if failure["permanent"]:
            self.futile.add((self.last_action, obs["holding"]))

    # ------------------------------------------------------------------ goal reading
    def _wanted(self, oid: str) -> bool:
        return any(self._clause_for(c, oid) for c in self.goal)

    def _destination(self, oid: str) -> bool:
        """Whether ``oid`` is where a goal wants things put (worth telling the others about)."""
        return any(
            c.predicate == "inside"
            and c.target not in (None, HOME)
            and (oid == c.target or _type(oid) == c.target)
            for c in self.goal
        )

    @staticmethod
    def _clause_for(c: Clause, oid: str) -> bool:
        return oid == c.subject if "|" in c.subject else _type(oid) == c.subject

    def _satisfied(self, c: Clause, oid: str) -> bool:
        entry = self.seen.get(oid, {})
        if c.predicate == "inside":
            parent = entry.get("in", "")
            return (
                bool(parent)
                and c.target not in (None, HOME)
                and (parent == c.target or _type(parent) == c.target)
            )
        if c.predicate == "isToggled":
            return ("on" in entry.get("state", "").split(", ")) == c.value
        if c.predicate == "isSliced":
            return "sliced" in entry.get("state", "")
        return False

    def _todo(self, holding: str) -> list[tuple[Clause, str]]:
        out = []
        for c in self.goal:
            if c.target == HOME:
                continue
            for oid in self.seen:
                if not self._clause_for(c, oid) or self._satisfied(c, oid):
                    continue
                if oid in self.avoid or self.seen[oid].get("in", "") in self.avoid:
                    continue
                if self.claims.get(oid, self.name) != self.name or oid == holding:
                    continue
                out.append((c, oid))
        return out

    # ------------------------------------------------------------------ acting
    def decide(self, obs: dict[str, Any]) -> str:
        action = self._choose(obs)
        for _ in range(len(self.futile)):
            if (action, obs["holding"]) not in self.futile:
                break
            self.avoid.add(action.partition(" ")[2])
            action = self._choose(obs)
        if (action, obs["holding"]) in self.futile:
            action = "explore"
        self.last_action = action
        if (
            self.mine is not None
            and self.tick - self.claimed_at.get(self.mine, self.tick) > CLAIM_TTL // 2
        ):
            self.claimed_at[self.mine] = self.tick
            self.outbox.appendleft(f"claim {self.mine}")
        if self.outbox:
            return f"{action} | say all: {self.outbox.popleft()}"
        return action

    def _visible(self, obs: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {o["objectId"]: o for o in obs["visible"]}

    def _choose(self, obs: dict[str, Any]) -> str:
        visible = self._visible(obs)
        holding = obs["holding"]
        tidy = self._tidy(visible)
        if tidy is not None:
            return tidy
        if holding:
            return self._deliver(holding, visible)
        for c, oid in sorted(self._todo(holding), key=lambda t: (t[1] not in visible, t[1])):
            if self.mine != oid:
                self.mine = oid
                self.claims[oid] = self.name
                self.claimed_at[oid] = self.tick
                self.outbox.appendleft(f"claim {oid}")
            return self._work_on(c, oid, visible)
        self.mine = None
        return self._search(visible)

    def _tidy(self, visible: dict[str, dict[str, Any]]) -> str | None:
        """Close a container it searched once nothing anyone wants is left inside."""
        for container in sorted(self.to_close):
            entry = visible.get(container)
            if entry is None or "open" not in entry["state"].split(", "):
                if entry is not None:
                    self.to_close.discard(container)
                continue
            if any(e["in"] == container and self._wanted(o) for o, e in visible.items()):
                continue
            self.to_close.discard(container)
            return f"close {container}"
        return None

    def _work_on(self, c: Clause, oid: str, visible: dict[str, dict[str, Any]]) -> str:
        entry = self.seen[oid]
        container = entry.get("in", "")
        if container and "closed" in self.seen.get(container, {}).get("state", ""):
            return f"open {container}" if container in visible else f"navigate {container}"
        if oid not in visible:
            return f"navigate {oid}"
        if c.predicate == "isToggled":
            return f"{'toggle_on' if c.value else 'toggle_off'} {oid}"
        if c.predicate == "isSliced":
            return "explore"
        return f"pickup {oid}"

    def _deliver(self, holding: str, visible: dict[str, dict[str, Any]]) -> str:
        clause = next(
            (c for c in self.goal if self._clause_for(c, holding) and c.predicate == "inside"), None
        )
        if clause is not None and clause.target not in (None, HOME):
            targets = [
                oid
                for oid in self.seen
                if (oid == clause.target or _type(oid) == clause.target) and oid not in self.avoid
            ]
            for oid in sorted(targets, key=lambda o: o not in visible):
                if "closed" in self.seen[oid].get("state", ""):
                    return f"open {oid}" if oid in visible else f"navigate {oid}"
                if oid in visible:
                    self.outbox.append(f"done {holding}")
                    return f"put {oid}"
                return f"navigate {oid}"
            return "explore"
        surfaces = [oid for oid, o in visible.items() if o["objectType"] in SURFACES]
        return f"put {surfaces[0]}" if surfaces else "explore"

    def _search(self, visible: dict[str, dict[str, Any]]) -> str:
        closed = [
            oid
            for oid, o in self.seen.items()
            if o["objectType"] in CONTAINERS
            and "closed" in o.get("state", "")
            and oid not in self.searched
            and oid not in self.avoid
            and self.claims.get(oid, self.name) == self.name
        ]
        if closed:
            target = min(closed, key=lambda o: (o not in visible, o))
            if target in visible:
                self.searched.add(target)
                self.to_close.add(target)
                self.outbox.append(f"searched {target}")
                return f"open {target}"
            if self.claims.get(target) != self.name:
                self.claims[target] = self.name
                self.outbox.append(f"claim {target}")
            return f"navigate {target}"
        return "explore"


class HeuristicTeam(Team):
    """One :class:`HeuristicAgent` per agent; no shared state except messages."""

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        goal = [parse_clause(text) for text in task_info.goal]
        self.agents = {a: HeuristicAgent(a, goal, agent_ids) for a in agent_ids}

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        actions = {}
        for name, agent in self.agents.items():
            obs = observations[name]
            if obs["needs_decision"]:
                agent.observe(obs)
                actions[name] = agent.decide(obs)
        return actions

    def close(self) -> None:
        self.agents = {}
