"""How a heuristic agent acts: the next skill towards the work it chose, or towards finding some.

For one piece of work (:mod:`baselines.heuristic.choosing`) it reaches the object (opening what
it is in), fetches a knife to slice it, switches on the appliance that cooks, washes or fills it
(trying the faucets it knows one by one for a basin), has it lifted with a partner when it is
heavy (:mod:`baselines.heuristic.lift`), and carries what it holds where the goal wants it, else
onto a surface in view. With nothing to work on it searches: it opens closed containers nobody
searched (in rearrangement also any closed receptacle that could hold a goal object, a toilet
say), closes them again once nothing wanted is left inside unless a goal wants them open, and
explores; its ``explore_order`` (:mod:`baselines.heuristic.style`) says which container first.
"""

from __future__ import annotations

from typing import Any

from baselines.heuristic.goals import CARRIED, GoalReader, about, names, places, satisfied, verb
from baselines.heuristic.lift import LiftCrew
from baselines.heuristic.memory import Memory
from baselines.heuristic.messages import Herald
from baselines.heuristic.style import first_container
from benchmark.tasks.goals import HOME, Clause
from benchmark.teamkit import BASINS
from benchmark.teamkit import type_of_id as _type

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

Visible = dict[str, dict[str, Any]]  # objectId -> its entry, for the objects in view


class Steps:
    """One agent's next skill for a piece of work, for what it holds, or for searching.

    Args:
        name: the agent.
        goal: the task's goal clauses.
        memory: what it knows.
        herald: its outgoing messages (``searched``, ``done`` and claims of containers).
        lift: its side of the joint lift (heavy objects).
        reader: the goal as read (objects wanted, destinations); its ``facts`` give the
            slicing tools, heat sources, basins and receptacles.
        explore_order: which closed container it searches first
            (:data:`~baselines.heuristic.style.EXPLORE_ORDERS`).

    Attributes:
        to_close: containers it searched and will close again.
        tried: objectId -> the faucets it switched on to wash or fill that object.
    """

    def __init__(
        self,
        name: str,
        goal: list[Clause],
        memory: Memory,
        herald: Herald,
        lift: LiftCrew,
        reader: GoalReader,
        explore_order: str = "default",
    ) -> None:
        self.name = name
        self.explore_order = explore_order
        self.goal = goal
        self.memory = memory
        self.seen = memory.seen
        self.avoid = memory.avoid
        self.herald = herald
        self.lift = lift
        self.reader = reader
        self.facts = reader.facts
        self.tools = reader.facts.slicing_tools
        self.to_close: set[str] = set()
        self.tried: dict[str, set[str]] = {}

    def tidy(self, visible: Visible) -> str | None:
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
            if any(self.reader.wanted(o) or self.reader.destination(o) for o in inside):
                continue
            self.to_close.discard(container)
            return f"close {container}"
        return None

    def work_on(self, c: Clause, oid: str, v: str, visible: Visible, knife: bool) -> str:
        """A step of work ``v`` on ``oid`` for clause ``c`` (``knife``: it holds one)."""
        if v == "slice" and not knife:
            return self.fetch_tool(visible)
        if v in ("cook", "wash", "fill"):
            step = self.switch_on(c, oid, visible)
            if step is not None:
                return step
        step = self.reach(oid, visible)
        if step is not None:
            return step
        if oid in self.lift.heavy and v in CARRIED:
            return self.lift.lead(oid, self.memory.tick, set(visible))
        if v == "toggle":
            return f"{'toggle_on' if c.value else 'toggle_off'} {oid}"
        if v == "open":
            return f"{'open' if c.value else 'close'} {oid}"
        return f"slice {oid}" if v == "slice" else f"pickup {oid}"

    def switch_on(self, c: Clause, oid: str, visible: Visible) -> str | None:
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
            return self.switch_on(c, oid, visible)  # running, and it did not work: another
        return f"toggle_on {faucet}"

    def reach(self, oid: str, visible: Visible) -> str | None:
        """A step towards having ``oid`` in view (opening what it is in), or None."""
        container = self.seen[oid].get("in", "")
        if container and "closed" in self.seen.get(container, {}).get("state", ""):
            return f"open {container}" if container in visible else f"navigate {container}"
        return None if oid in visible else f"navigate {oid}"

    def fetch_tool(self, visible: Visible) -> str:
        """A step towards holding a knife: the nearest one it knows of, else search."""
        tools = [
            oid
            for oid, entry in self.seen.items()
            if entry["objectType"] in self.tools and self.memory.free(oid, "")
        ]
        if not tools:
            return self.search(visible)
        tool = min(tools, key=lambda o: (o not in visible, o))
        return self.reach(tool, visible) or f"pickup {tool}"

    def deliver(self, holding: str, visible: Visible) -> str:
        """A step towards putting down what it holds: where the clause it was fetched for
        wants it (a receptacle, a heat source, a basin), else on a surface in view where no
        ``inside(...)=false`` clause forbids it."""
        home = self.memory.homes.of(holding)
        if home is not None and home not in self.avoid:
            step = self.reach(home, visible) or (
                f"open {home}" if "closed" in self.seen[home].get("state", "") else None
            )
            if step is None:
                self.herald.say(f"done {holding}")
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
                step = self.reach(oid, visible)  # a plate in a closed cabinet: open it first
                if step is not None:
                    return step
                if "closed" in self.seen[oid].get("state", ""):
                    return f"open {oid}"
                if clause.predicate == "inside":
                    self.herald.say(f"done {holding}")
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

    def search(self, visible: Visible) -> str:
        """A step towards finding goal objects: open the closed container nobody searched,
        in view first, then by objectId or as its ``explore_order`` says (claiming it on the
        way), else look where rearranged objects may be, else explore."""
        memory = self.memory
        closed = [
            oid
            for oid, o in self.seen.items()
            if (
                o["objectType"] in CONTAINERS
                or memory.homes.could_hide(o["objectType"], self.facts)
            )
            and "closed" in o.get("state", "")
            and oid not in memory.searched
            and oid not in self.avoid
            and memory.claims.get(oid, self.name) == self.name
        ]
        if closed:
            target = first_container(closed, visible, memory.pose, self.explore_order)
            if target in visible:
                memory.searched.add(target)
                self.to_close.add(target)
                self.herald.say(f"searched {target}")
                return f"open {target}"
            if memory.claims.get(target) != self.name:
                memory.claims[target] = self.name
                self.herald.say(f"claim {target}")
            return f"navigate {target}"
        return memory.homes.look(self.seen, self.facts) or "explore"
