"""The ``heuristic`` team: decentralised scripted agents that talk.

Each agent sees only its own observations and the messages it receives. It reads the task's
goal clauses (public task information), remembers what it has seen, and:

* works on goal objects it knows about, announcing ``claim <id>`` so that others leave them alone,
  for every predicate of the goal language (:mod:`baselines.heuristic.goals`): fetches them to
  their receptacle or out of it, switches, opens or closes them, slices them with a knife it
  fetches first, cooks them in a heat source, washes or fills them under a running faucet,
  brews coffee; a goal on objects that only slicing makes (``inside(TomatoSliced, Plate)``)
  starts by slicing their source; an ``any``/``count>=k`` clause is left alone once it has
  seen enough objects satisfy it;
* lifts a heavy object with one partner (:mod:`baselines.heuristic.lift`): a ``pickup``
  refused as ``too_heavy`` makes it ask ``help lift <id>``; a teammate with free hands answers
  ``coming <id>`` (one answer per object, the lower index wins), both say ``ready <id>`` once
  they see it and lift every tick until the lifts meet; whichever of the two holds it then
  carries it to its receptacle like any other object;
* for rearrangement goals (``inside(X, @home)``) learns each object's home from the
  ``belongs`` field of the receptacles it sees or from a teammate's ``home <id> in
  <receptacleId>``, tells the others each home it sees once, and carries the objects it knows
  to be away back home; when a few observations in a row show nothing new it goes to look at
  the receptacles that could hold one (:mod:`baselines.heuristic.homes`);
* reports discoveries, ``found <id> in <receptacleId>``, and searched containers,
  ``searched <id>``, so that nobody opens the same drawer twice;
* otherwise opens closed containers it has not searched (in rearrangement also any closed
  receptacle that could hold a goal object, a toilet say), closes them again once nothing wanted
  is left inside (a tidy housemate) unless a goal wants them open, and explores;
* never repeats an action that failed for a reason that cannot change (the observation's
  ``failure.permanent``): it leaves that object alone instead;
* raises :class:`~baselines.goal_routes.UnpursuableGoal` when it sees an object of an ``all``
  (or objectId) clause whose state no skill brings about (``isDirty(Bowl)=true`` on a clean
  bowl). For ``any``/``count>=k`` clauses of that kind it only looks: objects it has not seen
  may satisfy them.

With communication off the same agents duplicate searches and chase the same objects, and a
heavy object is lifted only when two of them happen to wait at it at the same time, which is
what the comm-ablation measures.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

from baselines.goal_routes import no_route, unpursuable
from baselines.heuristic.goals import CARRIED, GoalReader, about, names, places, satisfied, verb
from baselines.heuristic.homes import Homes
from baselines.heuristic.lift import LiftCrew
from benchmark.agents import Team
from benchmark.env.views import TaskInfo
from benchmark.sim.catalog import type_of_id as _type
from benchmark.sim.facts import object_facts
from benchmark.sim.state_changes import BASINS
from benchmark.tasks.goals import HOME, Atom, Clause, parse_clause

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
_MESSAGE = re.compile(r"^(claim|found|searched|done|home) (\S+)(?: in (\S+))?$")


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
        self.lift = LiftCrew(name, teammates, self.outbox)  # heavy objects: a partner
        self.reported: set[str] = set()
        self.mine: str | None = None
        self.to_close: set[str] = set()  # searched containers it opened and will close again
        self.last_action = ""  # its last action, without the message
        self.futile: set[tuple[str, str]] = set()  # (action, what it held) that cannot work
        self.avoid: set[str] = set()  # objects such an action was about
        self.tried: dict[str, set[str]] = {}  # object -> faucets switched on to wash/fill it
        self.homes = Homes(goal)  # where @home goals want their objects
        self.facts = facts = object_facts()
        self.tools = facts.slicing_tools
        self.reader = GoalReader(goal, facts)
        self.makes = self.reader.makes  # source type -> the derived type a goal wants

    # ------------------------------------------------------------------ perception
    def observe(self, obs: dict[str, Any]) -> None:
        self.tick = int(obs["tick"])
        for oid, at in list(self.claimed_at.items()):
            if self.tick - at > CLAIM_TTL and self.claims.get(oid) != self.name:
                del self.claims[oid], self.claimed_at[oid]
        for entry in obs["visible"]:
            oid = entry["objectId"]
            self.seen[oid] = dict(entry)
            if self.reader.relevant(oid) and oid not in self.reported:
                self.reported.add(oid)
                where = f" in {entry['in']}" if entry["in"] else ""
                self.outbox.append(f"found {oid}{where}")
        self.outbox.extend(self.homes.see(obs))
        if not obs["last_success"]:
            self._failed(obs)
        elif self.last_action.startswith("slice ") and self.last_action[6:] in self.seen:
            self.seen[self.last_action[6:]]["state"] = "sliced"
        elif self.last_action.startswith("lift "):  # lifted together: one of the two carries it
            oid = self.last_action[5:]
            self.claims[oid] = self.lift.lifted(oid, obs["holding"])
            self.claimed_at[oid] = self.tick
            if self.claims[oid] == self.name:
                self.mine = oid
                self.outbox.appendleft(f"claim {oid}")
        for msg in obs["messages"]:
            self.lift.hear(msg["sender"], msg["text"], self.tick)
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
            elif verb == "home" and where:
                self.homes.hear(oid, where, self.seen)
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
        self.lift.failed(failure["reason"], target)
        if failure["permanent"]:
            self.futile.add((self.last_action, obs["holding"]))

    # ------------------------------------------------------------------ goal reading
    def _wanted(self, oid: str) -> bool:
        return self.reader.wanted(oid)

    def _destination(self, oid: str) -> bool:
        """Whether ``oid`` is where a goal wants things put, or an appliance a goal needs
        (worth telling the others about)."""
        return self.reader.destination(oid)

    def _free(self, oid: str, holding: str) -> bool:
        """Whether it may work on ``oid``: not given up, not claimed by another, not in hand."""
        if oid in self.avoid or self.seen[oid].get("in", "") in self.avoid or self.lift.rests(oid):
            return False
        return self.claims.get(oid, self.name) == self.name and oid != holding

    def _enough(self, c: Clause) -> bool:
        """Whether an ``any``/``count>=k`` clause holds for the objects it has seen."""
        if c.quantifier == "all":
            return False
        done = sum(1 for oid, e in self.seen.items() if about(c, oid) and satisfied(c, e))
        return done >= max(1, c.count)

    def _todo(self, holding: str) -> list[tuple[Clause, str, str]]:
        """(clause, object, verb) it could work on (verbs: :mod:`baselines.heuristic.goals`).
        Without a known piece to take, a goal on pieces (TomatoSliced) slices a known source.
        Raises UnpursuableGoal on an ``all`` clause's object whose state no skill brings
        about."""
        out = []
        for c in self.goal:
            if c.target == HOME:
                out += self.homes.todo(c, self.seen, lambda o: self._free(o, holding), self.avoid)
                continue
            if self._enough(c):
                continue
            v = verb(c)
            pieces = [
                oid for oid in self.seen if about(c, oid) and not satisfied(c, self.seen[oid])
            ]
            if v is None:
                if pieces and c.quantifier == "all":
                    key = Atom(c.predicate, pieces[0], c.target, c.value).key
                    why = no_route(c.predicate, c.value, c.target) or ""
                    raise unpursuable("heuristic", key, why)
                continue
            out += [(c, oid, v) for oid in pieces if self._free(oid, holding)]
            if pieces or _type(c.subject) not in self.makes.values():
                continue
            out += [
                (c, oid, "slice")
                for oid, entry in self.seen.items()
                if self.makes.get(_type(oid)) == _type(c.subject)
                and "sliced" not in entry.get("state", "")
                and self._free(oid, holding)
            ]
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
        lifting = self.lift.step(self.tick, holding, set(visible))
        if lifting is not None:
            return lifting
        tidy = self._tidy(visible)
        if tidy is not None:
            return tidy
        todo = sorted(self._todo(holding), key=lambda t: (t[1] not in visible, t[1]))
        knife = _type(holding) in self.tools
        if holding and not (knife and any(v == "slice" for _, _, v in todo)):
            return self._deliver(holding, visible)
        for c, oid, v in todo:
            if holding and v != "slice":  # a knife in hand is for slicing
                continue
            if self.mine != oid:
                self.mine = oid
                self.claims[oid] = self.name
                self.claimed_at[oid] = self.tick
                self.outbox.appendleft(f"claim {oid}")
            return self._work_on(c, oid, v, visible, knife)
        self.mine = None
        return self._search(visible)

    def _tidy(self, visible: dict[str, dict[str, Any]]) -> str | None:
        """Close a container it searched once nothing anyone wants is left inside, unless a
        goal wants it open."""
        for container in sorted(self.to_close):
            entry = visible.get(container)
            if entry is None or "open" not in entry["state"].split(", "):
                if entry is not None:
                    self.to_close.discard(container)
                continue
            if any(c.predicate == "isOpen" and c.value and about(c, container) for c in self.goal):
                self.to_close.discard(container)
                continue
            inside = [o for o, e in visible.items() if e["in"] == container]
            if any(self._wanted(o) or self._destination(o) for o in inside):
                continue
            self.to_close.discard(container)
            return f"close {container}"
        return None

    def _work_on(
        self, c: Clause, oid: str, v: str, visible: dict[str, dict[str, Any]], knife: bool
    ) -> str:
        if v == "slice" and not knife:
            return self._fetch_tool(visible)
        if v in ("cook", "wash", "fill"):
            step = self._switch_on(c, oid, visible)
            if step is not None:
                return step
        step = self._reach(oid, visible)
        if step is not None:
            return step
        if oid in self.lift.heavy and v in CARRIED:
            return self.lift.lead(oid, self.tick, set(visible))
        if v == "toggle":
            return f"{'toggle_on' if c.value else 'toggle_off'} {oid}"
        if v == "open":
            return f"{'open' if c.value else 'close'} {oid}"
        return f"slice {oid}" if v == "slice" else f"pickup {oid}"

    def _switch_on(self, c: Clause, oid: str, visible: dict[str, dict[str, Any]]) -> str | None:
        """With ``oid`` in an appliance the clause needs, a step towards switching that on: the
        heat source or coffee machine itself, or for a basin the nearest faucet not tried yet
        for it. None when it is not in one."""
        where = self.seen[oid].get("in", "")
        if not where or _type(where) not in places(c, _type(oid), self.facts):
            return None
        if _type(where) not in BASINS:
            if "on" in self.seen.get(where, {}).get("state", "").split(", "):
                if oid not in visible:  # look at it: switching on may have done it
                    return f"navigate {oid}"
                self.avoid.add(oid)  # on, and it did not work: nothing more to try
                return "explore"
            return f"toggle_on {where}" if where in visible else f"navigate {where}"
        tried = self.tried.setdefault(oid, set())
        if tried and oid not in visible:  # look at it: the water may have reached it
            return f"navigate {oid}"
        faucets = [
            f
            for f, e in self.seen.items()
            if e["objectType"] == "Faucet" and f not in tried and f not in self.avoid
        ]
        if not faucets:  # look for one; give up once every faucet it knows was tried
            if tried:
                self.avoid.add(oid)
            return "explore"
        faucet = min(
            faucets,
            key=lambda f: (
                f not in visible,
                float(visible[f]["distance"]) if f in visible else 0,
                f,
            ),
        )
        if faucet not in visible:
            return f"navigate {faucet}"
        tried.add(faucet)
        if "on" in self.seen[faucet].get("state", "").split(", "):
            return self._switch_on(c, oid, visible)  # running, and it did not work: another
        return f"toggle_on {faucet}"

    def _reach(self, oid: str, visible: dict[str, dict[str, Any]]) -> str | None:
        """A step towards having ``oid`` in view (opening what it is in), or None."""
        container = self.seen[oid].get("in", "")
        if container and "closed" in self.seen.get(container, {}).get("state", ""):
            return f"open {container}" if container in visible else f"navigate {container}"
        return None if oid in visible else f"navigate {oid}"

    def _fetch_tool(self, visible: dict[str, dict[str, Any]]) -> str:
        """A step towards holding a knife: the nearest one it knows of, else search."""
        tools = [
            oid
            for oid, entry in self.seen.items()
            if entry["objectType"] in self.tools and self._free(oid, "")
        ]
        if not tools:
            return self._search(visible)
        tool = min(tools, key=lambda o: (o not in visible, o))
        return self._reach(tool, visible) or f"pickup {tool}"

    def _deliver(self, holding: str, visible: dict[str, dict[str, Any]]) -> str:
        """A step towards putting down what it holds: where the clause it was fetched for
        wants it (a receptacle, a heat source, a basin), else on a surface in view where no
        ``inside(...)=false`` clause forbids it."""
        home = self.homes.of(holding)
        if home is not None and home not in self.avoid:
            step = self._reach(home, visible) or (
                f"open {home}" if "closed" in self.seen[home].get("state", "") else None
            )
            if step is None:
                self.outbox.append(f"done {holding}")
            return step or f"put {home}"
        clause = next(
            (
                c
                for c in self.goal
                if about(c, holding)
                and verb(c) in CARRIED
                and verb(c) != "remove"
                and c.target != HOME
                and not satisfied(c, self.seen.get(holding, {}))
            ),
            None,
        )
        kinds = places(clause, _type(holding), self.facts) if clause is not None else ()
        if clause is not None and kinds:
            targets = [
                oid
                for oid in self.seen
                if any(names(kind, oid) for kind in kinds) and oid not in self.avoid
            ]
            for oid in sorted(targets, key=lambda o: o not in visible):
                step = self._reach(oid, visible)  # a plate in a closed cabinet: open it first
                if step is not None:
                    return step
                if "closed" in self.seen[oid].get("state", ""):
                    return f"open {oid}"
                if clause.predicate == "inside":
                    self.outbox.append(f"done {holding}")
                return f"put {oid}"
            return "explore"
        surfaces = [
            oid
            for oid, o in visible.items()
            if o["objectType"] in SURFACES
            and not any(
                c.predicate == "inside"
                and not c.value
                and about(c, holding)
                and names(c.target, oid)
                for c in self.goal
            )
        ]
        return f"put {surfaces[0]}" if surfaces else "explore"

    def _search(self, visible: dict[str, dict[str, Any]]) -> str:
        closed = [
            oid
            for oid, o in self.seen.items()
            if (o["objectType"] in CONTAINERS or self.homes.could_hide(o["objectType"], self.facts))
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
        return self.homes.look(self.seen, self.facts) or "explore"


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
