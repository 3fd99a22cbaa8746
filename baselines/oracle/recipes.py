"""The oracle's recipes: reactive steps towards one atom, read off the true state at every
decision. Open what encloses the object, fetch it, open the destination, put it (inside a
container the destination accepts when it never accepts the object itself: a statue in a box on
a sofa); fetch a knife before slicing, and slice a source first for a goal on pieces; toast a
slice; brew into a mug; switch things.
"""

from __future__ import annotations

from benchmark.goals import Atom, holds_for, matches
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import World

HEAT_FOR = {
    "BreadSliced": "Toaster",
    "Potato": "Microwave",
    "PotatoSliced": "Microwave",
    "EggCracked": "Microwave",
    "AppleSliced": "Microwave",
    "TomatoSliced": "Microwave",
}


class Recipes:
    """The recipes of one episode.

    Args:
        world: the simulator state (a snapshot; :meth:`look` gives the next one).
        heavy: indices of the objects only a joint lift picks up.
    """

    def __init__(self, world: World, heavy: frozenset[int]) -> None:
        self.world = world
        self.heavy = heavy
        self.claimed: dict[int, int] = {}  # agent -> the instance it works on (type-level atoms)

    def look(self, world: World) -> None:
        """Work on the state of this decision."""
        self.world = world

    def cell(self, index: int) -> tuple[int, int]:
        """The grid cell of object ``index``."""
        x, _, z = self.world.position(index)
        return round(x / GRID_SIZE), round(z / GRID_SIZE)

    def step(self, k: int, atom: Atom, team: list[int], deciding: list[int]) -> str | None:
        """Agent ``k``'s next step towards ``atom`` (``team``: the agents the atom is assigned
        to, for joint lifts; ``deciding``: the agents deciding now), or None when there is no
        way to it."""
        p = atom.predicate
        if p == "inside":
            return self._transport(k, atom, team, deciding)
        if p == "isToggled":
            index = self.world.index_of[atom.subject]
            return (
                self._reach(k, index)
                or f"{'toggle_on' if atom.value else 'toggle_off'} {atom.subject}"
            )
        if p == "isSliced":
            return self._slice(k, self._subject(k, atom))
        if p == "isCooked":
            return self._cook(k, atom)
        if p == "filledWith":
            return self._brew(k, atom)
        return None

    def _subject(self, k: int, atom: Atom) -> int:
        """The object an atom is about (for type-level atoms: an unsatisfied, free instance)."""
        world = self.world
        if not atom.at_least:
            return world.index_of[atom.subject]
        mine = self.claimed.get(k, -1)
        if (
            mine >= 0
            and world.objs[mine].active
            and matches(world, mine, atom.subject)
            and not holds_for(world, atom.predicate, mine, atom.target)
        ):
            return mine
        taken = {v for a, v in self.claimed.items() if a != k}
        for s in world.specs:
            if (
                matches(world, s.index, atom.subject)
                and world.objs[s.index].active
                and s.index not in taken
                and world.carrier(s.index) in (-1, k)
                and not holds_for(world, atom.predicate, s.index, atom.target)
            ):
                self.claimed[k] = s.index
                return s.index
        return -1

    def _reach(self, k: int, index: int) -> str | None:
        """The step towards being able to act on ``index`` (None when it is in reach)."""
        world = self.world
        if world.carrier(index) == k:
            return None
        if world.enclosed(index):
            container = next(
                p
                for p in world.ancestors(index)
                if world.specs[p].openable and not world.objs[p].is_open
            )
            if world.visible(k, container):
                return f"open {world.specs[container].object_id}"
            return f"navigate {world.specs[container].object_id}"
        if not world.visible(k, index):
            return f"navigate {world.specs[index].object_id}"
        return None

    def _holding(self, k: int) -> int:
        return self.world.agents[k].held

    def free_hands(self, k: int, keep: int = -1) -> str | None:
        """A step towards putting down whatever agent ``k`` holds (unless it is ``keep``)."""
        world = self.world
        held = self._holding(k)
        if held < 0 or held == keep:
            return None
        kind = world.specs[held].object_type
        spots = [
            s.index
            for s in world.specs
            if s.receptacle
            and not s.pickupable
            and world.objs[s.index].active
            and not (s.openable and not world.objs[s.index].is_open)
            and world.facts.accepts(s.object_type, kind)
            and s.object_type != "Floor"
        ]
        if not spots:
            return None
        a = world.agents[k]
        spot = min(
            spots,
            key=lambda r: (
                not world.visible(k, r),
                abs(self.cell(r)[0] - a.i) + abs(self.cell(r)[1] - a.j),
            ),
        )
        oid = world.specs[spot].object_id
        return f"put {oid}" if world.visible(k, spot) else f"navigate {oid}"

    def target_receptacle(self, atom: Atom, near: tuple[int, int]) -> int:
        world = self.world
        if atom.target is None:
            return -1
        if "|" in atom.target:
            return world.index_of.get(atom.target, -1)
        options = [
            s.index
            for s in world.specs
            if s.object_type == atom.target and world.objs[s.index].active
        ]
        if not options:
            return -1
        return min(
            options,
            key=lambda r: (
                world.enclosed(r),  # rather one in the open than one in a closed cabinet
                abs(self.cell(r)[0] - near[0]) + abs(self.cell(r)[1] - near[1]),
            ),
        )

    def _deliver(self, k: int, receptacle: int) -> str:
        """A step towards putting what agent ``k`` holds into ``receptacle``: reach it (open
        what encloses it, a plate in a closed cabinet), open it, put."""
        world = self.world
        step = self._reach(k, receptacle)
        if step is not None:
            return step
        oid = world.specs[receptacle].object_id
        if world.specs[receptacle].openable and not world.objs[receptacle].is_open:
            return f"open {oid}"
        return f"put {oid}"

    def _transport(self, k: int, atom: Atom, team: list[int], deciding: list[int]) -> str | None:
        """A step towards getting the atom's object into its receptacle: directly, or inside a
        container the receptacle accepts when it never accepts the object itself (a statue in a
        box on a sofa). An object that does not exist yet (a tomato slice) is made first."""
        world = self.world
        subject = self._subject(k, atom)
        if subject < 0:
            return self._derive(k, atom.subject) if atom.at_least else None
        a = world.agents[k]
        target = self.target_receptacle(atom, (a.i, a.j))
        if target < 0:
            return None
        kind = world.specs[subject].object_type
        if world.facts.accepts(world.specs[target].object_type, kind):
            return self._carry(k, subject, target, team, deciding)
        vessel = self._vessel(subject, target)
        if vessel < 0:
            return None
        if vessel in world.ancestors(subject):
            return self._carry(k, vessel, target, team, deciding)
        if world.carrier(vessel) not in (-1, k):  # someone carries the only container: wait
            return "wait"
        return self._carry(k, subject, vessel, team, deciding)

    def _vessel(self, index: int, target: int) -> int:
        """A pickupable container that accepts ``index`` and that ``target`` accepts: the one
        already holding it, else the nearest, preferring one nobody carries (-1 if none)."""
        world = self.world
        kind, there = world.specs[index].object_type, world.specs[target].object_type

        def fits(v: int) -> bool:
            spec = world.specs[v]
            return (
                spec.pickupable
                and spec.receptacle
                and world.objs[v].active
                and v not in self.heavy
                and world.facts.accepts(spec.object_type, kind)
                and world.facts.accepts(there, spec.object_type)
            )

        holding = next((p for p in world.ancestors(index) if fits(p)), -1)
        if holding >= 0:
            return holding
        options = [s.index for s in world.specs if fits(s.index)]
        if not options:
            return -1
        x, z = self.cell(index)
        return min(
            options,
            key=lambda v: (
                world.carrier(v) >= 0,  # rather one nobody is carrying
                abs(self.cell(v)[0] - x) + abs(self.cell(v)[1] - z),
                v,
            ),
        )

    def _carry(
        self, k: int, index: int, receptacle: int, team: list[int], deciding: list[int]
    ) -> str:
        """A step towards agent ``k`` putting ``index`` into ``receptacle`` (a heavy object is
        lifted with another agent of ``team``)."""
        world = self.world
        oid = world.specs[index].object_id
        carrier = world.carrier(index)
        if carrier == k:
            return self._deliver(k, receptacle)
        if carrier >= 0:  # a lift partner (or someone in the way) holds it: let them finish
            return "wait"
        step = self.free_hands(k) or self._reach(k, index)
        if step is not None:
            return step
        if index not in self.heavy:
            return f"pickup {oid}"
        partners = [j for j in team if j != k]
        if not partners:
            return "wait"
        j = partners[0]
        partner_ready = j in deciding and world.visible(j, index) and world.agents[j].held < 0
        return f"lift {oid}" if partner_ready else "wait"

    def _derive(self, k: int, kind: str) -> str | None:
        """A step towards making an object of ``kind`` that only an action creates (slicing
        the nearest source), or None when nothing can make one."""
        world = self.world
        a = world.agents[k]
        for way in world.facts.derivations(kind):
            if way.action != "SliceObject":  # breaking is no skill: only slicing makes pieces
                continue
            sources = [
                s.index
                for s in world.specs
                if s.object_type == way.source
                and world.objs[s.index].active
                and not world.objs[s.index].is_sliced
                and world.carrier(s.index) in (-1, k)
            ]
            if sources:
                source = min(
                    sources,
                    key=lambda t: abs(self.cell(t)[0] - a.i) + abs(self.cell(t)[1] - a.j),
                )
                return self._slice(k, source)
        return None

    def _tool(self, k: int) -> int:
        world = self.world
        tools = [
            s.index
            for s in world.specs
            if s.object_type in world.facts.slicing_tools
            and world.objs[s.index].active
            and world.carrier(s.index) in (-1, k)
        ]
        if not tools:
            return -1
        a = world.agents[k]
        return min(tools, key=lambda t: abs(self.cell(t)[0] - a.i) + abs(self.cell(t)[1] - a.j))

    def _slice(self, k: int, index: int) -> str | None:
        world = self.world
        if index < 0 or world.objs[index].is_sliced:
            return None
        held = self._holding(k)
        if held < 0 or world.specs[held].object_type not in world.facts.slicing_tools:
            step = self.free_hands(k)
            if step is not None:
                return step
            tool = self._tool(k)
            if tool < 0:
                return "wait"
            return self._reach(k, tool) or f"pickup {world.specs[tool].object_id}"
        return self._reach(k, index) or f"slice {world.specs[index].object_id}"

    def _cook(self, k: int, atom: Atom) -> str | None:
        world = self.world
        index = self._subject(k, atom)
        if index < 0:
            return self._derive(k, atom.subject)
        a = world.agents[k]
        heater_type = HEAT_FOR.get(atom.subject, "Microwave")
        heater = self.target_receptacle(Atom("inside", "", heater_type, True), (a.i, a.j))
        if heater < 0:
            return None
        return self._heat(k, index, heater)

    def _heat(self, k: int, index: int, appliance: int) -> str | None:
        """Put ``index`` into ``appliance`` and switch it on (cooking, toasting, brewing)."""
        world = self.world
        if world.objs[index].parent == appliance and world.carrier(index) < 0:
            if world.objs[appliance].is_toggled:
                return None
            return self._reach(k, appliance) or f"toggle_on {world.specs[appliance].object_id}"
        if self._holding(k) != index:
            step = self.free_hands(k)
            if step is not None:
                return step
            return self._reach(k, index) or f"pickup {world.specs[index].object_id}"
        return self._deliver(k, appliance)

    def _brew(self, k: int, atom: Atom) -> str | None:
        index = self._subject(k, atom)
        if index < 0:
            return None
        machine = self.target_receptacle(
            Atom("inside", "", "CoffeeMachine", True), self.cell(index)
        )
        return None if machine < 0 else self._heat(k, index, machine)
