"""The oracle's recipes: reactive steps towards one atom, read off the true state at every
decision, for every predicate of the goal language along the skill routes of
:mod:`baselines.goal_routes`. Moving things is :mod:`baselines.oracle.moving`; here are the
state changes: switch, open or close; fetch a knife and slice (a source first, for a goal on
pieces); cook in a heat source; wash or fill with water under a running faucet; brew coffee.

An atom no skill can bring about, or that no object of this scene lets the routes reach,
raises :class:`~baselines.goal_routes.UnpursuableGoal` naming it.
"""

from __future__ import annotations

from baselines.goal_routes import (
    heater_types,
    liquid_sources,
    no_route,
    unpursuable,
    washing_basins,
)
from baselines.oracle.moving import Mover
from benchmark.skills import skill, skills_bringing_about
from benchmark.tasks.goals import Atom
from benchmark.teamkit.privileged import basin_of, heat_is_on, reachable_by_sight


def direct_skill(predicate: str, value: bool) -> str | None:
    """The one-agent skill that makes ``predicate`` take ``value`` on the object it names
    (``open`` for isOpen, ``toggle_off`` for isToggled=false), or None."""
    for name in skills_bringing_about(predicate, value, side_effects=False):
        spec = skill(name)
        if spec.primitive is not None and not spec.joint:
            return name
    return None


class Recipes(Mover):
    """The recipes of one episode (arguments: see :class:`~baselines.oracle.moving.Mover`)."""

    def step(self, k: int, atom: Atom, team: list[int], deciding: list[int]) -> str | None:
        """Agent ``k``'s next step towards the unsatisfied ``atom`` (``team``: the agents the
        atom is assigned to, for joint lifts; ``deciding``: the agents deciding now), or None
        when there is no way to it now. Raises UnpursuableGoal when there never is."""
        p = atom.predicate
        why = no_route(p, atom.value, atom.target)
        if why is not None:
            raise unpursuable("oracle", atom.key, why)
        if p == "inside":
            subject = self._subject(k, atom)
            if subject < 0:
                return self._derive(k, atom.subject) if atom.at_least and atom.value else None
            move = self._transport if atom.value else self._take_out
            return move(k, atom, subject, team, deciding)
        if p == "isSliced":
            return self._slice(k, self._subject(k, atom))
        if p == "isCooked" and atom.value:
            return self._cook(k, atom, team, deciding)
        if p == "isDirty" and not atom.value:
            return self._wash(k, atom, team, deciding)
        if p in ("isFilledWithLiquid", "filledWith") and atom.value:
            return self._fill(k, atom, team, deciding)
        verb = direct_skill(p, atom.value)
        if verb is not None:
            return self._apply(k, atom, verb)
        raise unpursuable("oracle", atom.key, f"the oracle has no recipe for {p}")

    # ------------------------------------------------------------------ switching, opening
    def _apply(self, k: int, atom: Atom, verb: str) -> str | None:
        """Reach the atom's object (for a type-level atom, one instance) and use the skill
        that changes its state directly: toggle, open or close it."""
        index = self._subject(k, atom)
        if index < 0:
            return None
        return self._reach(k, index) or f"{verb} {self.world.specs[index].object_id}"

    # ------------------------------------------------------------------ slicing
    def _derive(self, k: int, kind: str) -> str | None:
        """A step towards making an object of ``kind`` that only an action creates (slicing
        the nearest source), or None when nothing can make one."""
        world = self.world
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
                return self._slice(k, self._nearest(sources, self._here(k)))
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
        return self._nearest(tools, self._here(k))

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

    # ------------------------------------------------------------------ appliances
    def _cook(self, k: int, atom: Atom, team: list[int], deciding: list[int]) -> str | None:
        """isCooked: put the object in a heat source and switch it on."""
        world = self.world
        index = self._subject(k, atom)
        if index < 0:
            return self._derive(k, atom.subject) if atom.at_least else None
        kinds = heater_types(self._kind(index), world.facts)
        for heater_type in kinds:  # the preferred type where the scene has one
            heater = self.target_receptacle(Atom("inside", "", heater_type, True), self._here(k))
            if heater >= 0:
                return self._use(k, index, heater, heater, team, deciding)
        raise unpursuable(
            "oracle",
            atom.key,
            f"cooking puts a {self._kind(index)} in a heat source that accepts it "
            f"({', '.join(kinds) or 'none does'}), and {world.scene.name} has none",
        )

    def _wash(self, k: int, atom: Atom, team: list[int], deciding: list[int]) -> str | None:
        """isDirty=false: put the object in a basin under a faucet and run the water."""
        index = self._subject(k, atom)
        if index < 0:
            return None
        basins = washing_basins(self._kind(index), self.world.facts)
        return self._at_station(k, atom, index, basins, team, deciding)

    def _fill(self, k: int, atom: Atom, team: list[int], deciding: list[int]) -> str | None:
        """isFilledWithLiquid / filledWith: running water, or a coffee machine for coffee."""
        world = self.world
        index = self._subject(k, atom)
        if index < 0:
            return None
        st = world.objs[index]
        if st.is_filled:  # with another liquid: filledWith(Mug, coffee) on a mug of water
            why = no_route("isFilledWithLiquid", False, None)
            raise unpursuable(
                "oracle", atom.key, f"{world.specs[index].object_id} holds {st.fill_liquid}; {why}"
            )
        liquid = atom.target if atom.predicate == "filledWith" else None
        sources = liquid_sources(self._kind(index), liquid, world.facts)
        return self._at_station(k, atom, index, sources, team, deciding)

    def _kind(self, index: int) -> str:
        return self.world.specs[index].object_type

    def _stations(self, types: list[str]) -> list[tuple[int, int]]:
        """(receptacle, switch) pairs of these receptacle types that wash or fill what they
        hold once switched on: a basin and the faucet running into it, a coffee machine and
        itself; both must be in sight of some reachable pose."""
        world = self.world
        out = []
        for s in world.specs:
            if not world.objs[s.index].active or not s.toggleable:
                continue
            if s.object_type == "Faucet":
                basin = basin_of(world, s.index)
                if basin >= 0 and world.specs[basin].object_type in types:
                    out.append((basin, s.index))
            elif s.object_type == "CoffeeMachine" and s.object_type in types:
                out.append((s.index, s.index))
        return [
            (place, switch)
            for place, switch in out
            if reachable_by_sight(world, place) and reachable_by_sight(world, switch)
        ]

    def _at_station(
        self,
        k: int,
        atom: Atom,
        index: int,
        types: list[str],
        team: list[int],
        deciding: list[int],
    ) -> str | None:
        """Put ``index`` in the receptacle of the nearest station of these types (see
        :meth:`_stations`) and switch it on."""
        world = self.world
        spec = world.specs[index]
        stations = self._stations(types)
        if not spec.pickupable or not stations:
            verb = "wash" if atom.predicate == "isDirty" else "fill"
            routes = []
            if atom.target != "coffee":
                routes.append("running water (a SinkBasin or BathtubBasin a Faucet runs into)")
            if atom.predicate != "isDirty" and atom.target in (None, "coffee"):
                routes.append("a CoffeeMachine")
            what = " or ".join(routes)
            why = (
                f"{spec.object_id} is not pickupable, and the skills {verb} an object only by "
                f"carrying it to {what}"
                if not spec.pickupable
                else f"{world.scene.name} has no {what} within reach that accepts a "
                f"{spec.object_type}"
            )
            raise unpursuable("oracle", atom.key, why)
        there = [ps for ps in stations if ps[0] in world.ancestors(index)]
        if there and world.carrier(index) < 0:
            place, switch = there[0]
        else:
            place = self._nearest([p for p, _ in stations], self.cell(index))
            switch = next(s for p, s in stations if p == place)
        return self._use(k, index, place, switch, team, deciding)

    def _use(
        self, k: int, index: int, place: int, switch: int, team: list[int], deciding: list[int]
    ) -> str | None:
        """Put ``index`` in ``place`` and switch ``switch`` on (cooking in a microwave, washing
        under a faucet, brewing); None when it is there and the switch is on already."""
        world = self.world
        if place in world.ancestors(index) and world.carrier(index) < 0:
            if heat_is_on(world, switch):
                return None
            return self._reach(k, switch) or f"toggle_on {world.specs[switch].object_id}"
        return self._carry(k, index, place, team, deciding)
