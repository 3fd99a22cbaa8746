"""The ``oracle`` team: full observability and a central greedy planner; the upper reference.

Checklist atoms are assigned to agents greedily to minimise the makespan (longest estimated
job first, each to the agent that would finish it earliest); atoms needing a joint lift get two
agents. Each agent then works through its atoms with reactive recipes that look at the true
state at every decision: open what encloses the object, fetch it, open the destination, put it;
fetch a knife before slicing; toast a slice; brew into a mug; toggle things off. With one agent
it is the single-agent reference used for speedup.

It reads the episode's scoring state through the read-only privileged view
(:class:`~benchmark.env.views.PrivilegedView`: checklist, satisfied atoms, heavy objects,
capabilities and a world snapshot at every decision), never the environment. A step that failed
for a reason that cannot change is never issued again: when an atom's recipe comes back to it,
the atom is given up.
"""

from __future__ import annotations

from typing import Any

from benchmark.agents import Team
from benchmark.env.views import PrivilegedView, TaskInfo
from benchmark.goals import Atom, holds_for, matches
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import World

STEP_COST = 4  # estimated ticks for each interaction in a job
HEAT_FOR = {
    "BreadSliced": "Toaster",
    "Potato": "Microwave",
    "PotatoSliced": "Microwave",
    "EggCracked": "Microwave",
    "AppleSliced": "Microwave",
    "TomatoSliced": "Microwave",
}
GIVE_UP_AFTER = 4


class OracleTeam(Team):
    """Central planner over all agents (needs ``observability='full'``)."""

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        if task_info.privileged is None:
            raise ValueError(
                "the oracle needs full observability (env option observability='full')"
            )
        self.view: PrivilegedView = task_info.privileged
        self.checklist = self.view.checklist
        self.heavy = self.view.heavy
        self.world: World = self.view.world()
        self.satisfied = self.view.satisfied()
        self.agents = agent_ids
        self.assigned: dict[int, list[int]] = {}  # atom -> agents
        self.queue: list[list[int]] = [[] for _ in agent_ids]
        self.failures: dict[tuple[int, int], int] = {}
        self.claimed: dict[int, int] = {}  # agent -> object it is working with (count atoms)
        self.dropped: set[int] = set()
        self.working: dict[int, int] = {}  # agent -> the atom its last step was for
        self.last_step: dict[int, tuple[str, int]] = {}  # agent -> (its last step, what it held)
        self.futile: set[tuple[str, int]] = set()  # (step, held object) that can never work

    # ------------------------------------------------------------------ assignment

    def _cell(self, index: int) -> tuple[int, int]:
        x, _, z = self.world.position(index)
        return round(x / GRID_SIZE), round(z / GRID_SIZE)

    def _cost(self, start: tuple[int, int], atom: Atom) -> tuple[int, tuple[int, int]]:
        """Estimated ticks of ``atom`` from ``start`` and where the agent ends."""
        world = self.world
        subject = world.index_of.get(atom.subject, -1)
        if subject < 0:
            subject = next((s.index for s in world.specs if s.object_type == atom.subject), -1)
        here = self._cell(subject) if subject >= 0 else start
        cost = abs(here[0] - start[0]) + abs(here[1] - start[1]) + STEP_COST
        if atom.target and atom.predicate == "inside":
            target = self._target_receptacle(atom, here)
            if target >= 0:
                there = self._cell(target)
                cost += abs(there[0] - here[0]) + abs(there[1] - here[1]) + STEP_COST
                here = there
        return cost, here

    def _assign(self) -> None:
        world = self.world
        pending = [
            i
            for i in range(len(self.checklist))
            if not self.satisfied[i] and i not in self.assigned and i not in self.dropped
        ]
        if not pending:
            return
        load = [0.0] * len(self.agents)
        ends = [(a.i, a.j) for a in world.agents]
        for k, q in enumerate(self.queue):
            for i in q:
                c, ends[k] = self._cost(ends[k], self.checklist[i])
                load[k] += c
        jobs = sorted(pending, key=lambda i: -self._cost(ends[0], self.checklist[i])[0])
        for i in jobs:
            atom = self.checklist[i]
            able = [k for k in range(len(self.agents)) if self._able(k, atom)] or list(
                range(len(self.agents))
            )
            options = sorted(able, key=lambda k: load[k] + self._cost(ends[k], atom)[0])
            team = options[:2] if self._heavy(atom) and len(options) >= 2 else options[:1]
            for k in team:
                c, ends[k] = self._cost(ends[k], atom)
                load[k] += c
                self.queue[k].append(i)
            self.assigned[i] = team

    def _able(self, k: int, atom: Atom) -> bool:
        """Whether agent ``k``'s capabilities allow the skills ``atom`` is likely to need."""
        cannot = self.view.cannot[k]
        if not cannot:
            return True
        world = self.world
        needs = {
            "inside": {"pickup", "put"},
            "isToggled": {"toggle_on", "toggle_off"},
            "isSliced": {"pickup", "slice"},
        }.get(atom.predicate, {"pickup", "put", "toggle_on"})
        if self._heavy(atom):
            needs = {"lift", "put"}
        subject = world.index_of.get(atom.subject, -1)
        target = world.index_of.get(atom.target or "", -1)
        if (
            (subject >= 0 and world.enclosed(subject))
            or atom.predicate != "inside"
            or (target >= 0 and world.specs[target].openable)
            or (target < 0 and any(s.openable for s in world.specs if s.object_type == atom.target))
        ):
            needs = needs | {"open"}
        return not (needs & cannot)

    def _heavy(self, atom: Atom) -> bool:
        index = self.world.index_of.get(atom.subject, -1)
        return index in self.heavy

    # ------------------------------------------------------------------ acting
    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        self.world, self.satisfied = self.view.world(), self.view.satisfied()
        for i, ok in enumerate(self.satisfied):
            if ok and i in self.assigned:
                for k in self.assigned.pop(i):
                    self.queue[k] = [j for j in self.queue[k] if j != i]
        deciding = [k for k, a in enumerate(self.agents) if observations[a]["needs_decision"]]
        for k in deciding:
            obs = observations[self.agents[k]]
            if not obs["last_success"]:
                self._failed(k, obs["failure"])
        self._assign()
        actions = {}
        for k in deciding:
            step = self._next(k, deciding) or "wait"
            self.last_step[k] = (step, self.world.agents[k].held)
            actions[self.agents[k]] = step
        return actions

    def _failed(self, k: int, failure: dict[str, Any]) -> None:
        """Agent ``k``'s last step failed: remember it when it can never work; give its atom
        up after repeated failures otherwise."""
        if failure["permanent"] and k in self.last_step:
            self.futile.add(self.last_step[k])
            return
        i = self.working.get(k, -1)
        if i < 0 or i in self.dropped or i not in self.assigned:
            return
        self.failures[(k, i)] = self.failures.get((k, i), 0) + 1
        if self.failures[(k, i)] > GIVE_UP_AFTER * 3:
            self._drop(i)

    def _drop(self, i: int) -> None:
        self.dropped.add(i)
        for k in self.assigned.pop(i, []):
            self.queue[k] = [j for j in self.queue[k] if j != i]

    def _next(self, k: int, deciding: list[int]) -> str | None:
        cannot = self.view.cannot[k]
        self.working.pop(k, None)
        while self.queue[k]:
            i = self.queue[k][0]
            if self.satisfied[i]:
                self.queue[k].pop(0)
                continue
            step = self._recipe(k, self.checklist[i], i, deciding)
            if step is not None and step.split()[0] in cannot:
                self._hand_back(k, i)
                continue
            if (step, self.world.agents[k].held) in self.futile:
                step = None
            if step is not None:
                self.working[k] = i
                return step
            self._drop(i)
        held = self.world.agents[k].held
        if held >= 0 and not all(self.satisfied):
            return self._free_hands(k) or "wait"
        if all(self.satisfied):
            return "done"
        return self._make_room(k)

    def _hand_back(self, k: int, i: int) -> None:
        """Agent ``k`` cannot do atom ``i``: give it to the others."""
        self.queue[k] = [j for j in self.queue[k] if j != i]
        team = [j for j in self.assigned.pop(i, []) if j != k]
        others = [j for j in range(len(self.agents)) if j != k and j not in team]
        if others or team:
            helper = (team or others)[0]
            self.queue[helper].append(i)
            self.assigned[i] = [helper, *team[1:]] if team else [helper]
        else:
            self._drop(i)

    def _make_room(self, k: int) -> str:
        """An idle agent near a busy one walks off to look around, so it blocks nobody."""
        world = self.world
        a = world.agents[k]
        for j, b in enumerate(world.agents):
            if j != k and self.queue[j] and abs(a.i - b.i) + abs(a.j - b.j) <= 3:
                return "explore"
        return "wait"

    # ------------------------------------------------------------------ recipes
    def _recipe(self, k: int, atom: Atom, i: int, deciding: list[int]) -> str | None:
        p = atom.predicate
        if p == "inside":
            return self._transport(k, atom, i, deciding)
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

    def _free_hands(self, k: int, keep: int = -1) -> str | None:
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
                abs(self._cell(r)[0] - a.i) + abs(self._cell(r)[1] - a.j),
            ),
        )
        oid = world.specs[spot].object_id
        return f"put {oid}" if world.visible(k, spot) else f"navigate {oid}"

    def _target_receptacle(self, atom: Atom, near: tuple[int, int]) -> int:
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
                abs(self._cell(r)[0] - near[0]) + abs(self._cell(r)[1] - near[1]),
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

    def _transport(self, k: int, atom: Atom, i: int, deciding: list[int]) -> str | None:
        """A step towards getting the atom's object into its receptacle: directly, or inside a
        container the receptacle accepts when it never accepts the object itself (a statue in a
        box on a sofa). An object that does not exist yet (a tomato slice) is made first."""
        world = self.world
        subject = self._subject(k, atom)
        if subject < 0:
            return self._derive(k, atom.subject) if atom.at_least else None
        a = world.agents[k]
        target = self._target_receptacle(atom, (a.i, a.j))
        if target < 0:
            return None
        kind = world.specs[subject].object_type
        if world.facts.accepts(world.specs[target].object_type, kind):
            return self._carry(k, subject, target, i, deciding)
        vessel = self._vessel(subject, target)
        if vessel < 0:
            return None
        if vessel in world.ancestors(subject):
            return self._carry(k, vessel, target, i, deciding)
        if world.carrier(vessel) not in (-1, k):  # someone carries the only container: wait
            return "wait"
        return self._carry(k, subject, vessel, i, deciding)

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
        x, z = self._cell(index)
        return min(
            options,
            key=lambda v: (
                world.carrier(v) >= 0,  # rather one nobody is carrying
                abs(self._cell(v)[0] - x) + abs(self._cell(v)[1] - z),
                v,
            ),
        )

    def _carry(self, k: int, index: int, receptacle: int, i: int, deciding: list[int]) -> str:
        """A step towards agent ``k`` putting ``index`` into ``receptacle`` (for atom ``i``;
        a heavy object is lifted with the atom's other agent)."""
        world = self.world
        oid = world.specs[index].object_id
        carrier = world.carrier(index)
        if carrier == k:
            return self._deliver(k, receptacle)
        if carrier >= 0:  # a lift partner (or someone in the way) holds it: let them finish
            return "wait"
        step = self._free_hands(k) or self._reach(k, index)
        if step is not None:
            return step
        if index not in self.heavy:
            return f"pickup {oid}"
        partners = [j for j in self.assigned.get(i, [k]) if j != k]
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
                    key=lambda t: abs(self._cell(t)[0] - a.i) + abs(self._cell(t)[1] - a.j),
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
        return min(tools, key=lambda t: abs(self._cell(t)[0] - a.i) + abs(self._cell(t)[1] - a.j))

    def _slice(self, k: int, index: int) -> str | None:
        world = self.world
        if index < 0 or world.objs[index].is_sliced:
            return None
        held = self._holding(k)
        if held < 0 or world.specs[held].object_type not in world.facts.slicing_tools:
            step = self._free_hands(k)
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
        heater = self._target_receptacle(Atom("inside", "", heater_type, True), (a.i, a.j))
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
            step = self._free_hands(k)
            if step is not None:
                return step
            return self._reach(k, index) or f"pickup {world.specs[index].object_id}"
        return self._deliver(k, appliance)

    def _brew(self, k: int, atom: Atom) -> str | None:
        index = self._subject(k, atom)
        if index < 0:
            return None
        machine = self._target_receptacle(
            Atom("inside", "", "CoffeeMachine", True), self._cell(index)
        )
        return None if machine < 0 else self._heat(k, index, machine)
