"""The oracle's steps for moving things: reach an object (opening what encloses it), fetch it,
put it in a receptacle (inside a container the receptacle accepts when it never accepts the
object itself: a statue in a box on a sofa), take it out of one, put down what is in hand.
Every step is read off the true state at each decision.
"""

from __future__ import annotations

from benchmark.tasks.goals import Atom, holds_for, matches
from benchmark.teamkit.privileged import GRID_SIZE, World


class Mover:
    """Moving steps of one episode.

    Args:
        world: the simulator state (a snapshot; :meth:`look` gives the next one).
        heavy: indices of the objects only a joint lift picks up.
        checklist: the episode's goal atoms (things are never put down where an
            ``inside(...)=false`` atom forbids them).
    """

    def __init__(self, world: World, heavy: frozenset[int], checklist: tuple[Atom, ...]) -> None:
        self.world = world
        self.heavy = heavy
        self.keep_out = [a for a in checklist if a.predicate == "inside" and not a.value]
        self.claimed: dict[int, int] = {}  # agent -> the instance it works on (type-level atoms)

    def look(self, world: World) -> None:
        """Work on the state of this decision."""
        self.world = world

    def cell(self, index: int) -> tuple[int, int]:
        """The grid cell of object ``index``."""
        x, _, z = self.world.position(index)
        return round(x / GRID_SIZE), round(z / GRID_SIZE)

    def _nearest(self, options: list[int], near: tuple[int, int]) -> int:
        """The option closest to cell ``near`` on the grid (-1 if there is none)."""
        if not options:
            return -1
        return min(
            options,
            key=lambda r: (abs(self.cell(r)[0] - near[0]) + abs(self.cell(r)[1] - near[1]), r),
        )

    def _here(self, k: int) -> tuple[int, int]:
        a = self.world.agents[k]
        return a.i, a.j

    def _subject(self, k: int, atom: Atom) -> int:
        """The object an atom is about; for a type-level atom, an instance that does not have
        the state yet and that nobody else works on or carries (-1: none)."""
        world = self.world
        if not atom.at_least:
            return world.index_of[atom.subject]

        def open_case(index: int) -> bool:
            return (
                world.objs[index].active
                and matches(world, index, atom.subject)
                and holds_for(world, atom.predicate, index, atom.target) != atom.value
            )

        mine = self.claimed.get(k, -1)
        if mine >= 0 and open_case(mine):
            return mine
        taken = {v for a, v in self.claimed.items() if a != k}
        for s in world.specs:
            if s.index not in taken and world.carrier(s.index) in (-1, k) and open_case(s.index):
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

    def _forbidden(self, index: int, spot: int) -> bool:
        """Whether putting ``index`` in ``spot`` would break an ``inside(...)=false`` atom."""
        world = self.world
        places = [spot, *world.ancestors(spot)]
        return any(
            matches(world, index, a.subject) and any(matches(world, p, a.target) for p in places)
            for a in self.keep_out
        )

    def _spot(self, k: int, index: int) -> int:
        """Where agent ``k`` best puts ``index`` down: a furniture receptacle that is open and
        accepts it, in view first, then the nearest (-1: none)."""
        world = self.world
        kind = world.specs[index].object_type
        spots = [
            s.index
            for s in world.specs
            if s.receptacle
            and not s.pickupable
            and world.objs[s.index].active
            and not (s.openable and not world.objs[s.index].is_open)
            and world.facts.accepts(s.object_type, kind)
            and s.object_type != "Floor"
            and not self._forbidden(index, s.index)
        ]
        if not spots:
            return -1
        i, j = self._here(k)
        return min(
            spots,
            key=lambda r: (
                not world.visible(k, r),
                abs(self.cell(r)[0] - i) + abs(self.cell(r)[1] - j),
            ),
        )

    def free_hands(self, k: int, keep: int = -1) -> str | None:
        """A step towards putting down whatever agent ``k`` holds (unless it is ``keep``)."""
        world = self.world
        held = self._holding(k)
        if held < 0 or held == keep:
            return None
        spot = self._spot(k, held)
        if spot < 0:
            return None
        oid = world.specs[spot].object_id
        return f"put {oid}" if world.visible(k, spot) else f"navigate {oid}"

    def target_receptacle(self, atom: Atom, near: tuple[int, int]) -> int:
        """The receptacle an ``inside`` atom's object goes to: the one it names, or the
        nearest of its type, preferring one in the open (-1: none)."""
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

    def _transport(
        self, k: int, atom: Atom, subject: int, team: list[int], deciding: list[int]
    ) -> str | None:
        """A step towards getting object ``subject`` into the atom's receptacle: directly, or
        inside a container the receptacle accepts when it never accepts the object itself (a
        statue in a box on a sofa)."""
        world = self.world
        target = self.target_receptacle(atom, self._here(k))
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

    def _take_out(
        self, k: int, atom: Atom, subject: int, team: list[int], deciding: list[int]
    ) -> str | None:
        """A step towards getting object ``subject`` out of the atom's receptacle
        (``inside=false``): fetch it and put it where no such atom forbids it."""
        if self.world.carrier(subject) == k:
            return self.free_hands(k)
        spot = self._spot(k, subject)
        return None if spot < 0 else self._carry(k, subject, spot, team, deciding)

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
