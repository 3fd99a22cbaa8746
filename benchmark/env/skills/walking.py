"""Skills that walk: ``navigate`` and ``explore``.

``navigate`` walks one cell per tick along a shortest path (turning and stepping in the same
tick) to a pose from which the target is seen, re-planning around other agents and waiting when
they block every route; after ``PATIENCE`` blocked ticks it gives up. ``explore`` walks to the
unvisited cell away from the other agents and looks around.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmark.env.skills.base import Skill, SkillFailure
from benchmark.sim.planning import Pose, shortest_path
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import HEADINGS, ActionResult, World

PATIENCE = 6
STRIDE = 4  # explore heads for unvisited cells at least this many steps away
CANDIDATES = 12  # how many such cells explore weighs against the other agents' positions
EXPLORE_BUDGET = 30  # ticks after which an explore ends wherever it is
DETOUR = 6
SLACK = 12
SCAN_HORIZON = 30


def _teleport(i: int, j: int, rotation: int, horizon: float) -> dict:
    return {
        "action": "Teleport",
        "position": {"x": i * GRID_SIZE, "z": j * GRID_SIZE},
        "rotation": rotation,
        "horizon": horizon,
    }


def _heading(a: tuple[int, int], b: tuple[int, int]) -> int:
    return next(r for r, d in HEADINGS.items() if d == (b[0] - a[0], b[1] - a[1]))


@dataclass
class Navigate(Skill):
    """Walk to a pose that sees ``target``. ``poses`` are the candidate poses (grid-wide).

    The route is the shortest path ignoring other agents. When an agent stands on the next
    cell, a detour of at most ``DETOUR`` extra cells around it is taken, unless that agent is
    walking too and has a lower index (it has the right of way); otherwise the agent waits (a
    blocked tick) and records the cell it wants in ``wanted``. It gives up after ``PATIENCE``
    blocked ticks in a row, or when the walk takes more than twice its planned length plus
    ``SLACK`` ticks.
    """

    poses: list[Pose] = field(default_factory=list, repr=False)
    goal: Pose | None = None
    budget: int = -1
    wanted: tuple[int, int] | None = None  # the occupied cell it waits for, if blocked
    plan: list[tuple[int, int]] = field(default_factory=list, repr=False)  # cells still to walk
    walking: frozenset[int] = frozenset()  # agents walking this tick (set by the environment)

    def next_action(self, world: World, agent: int) -> dict | None:
        a = world.agents[agent]
        here = (a.i, a.j)
        self.wanted = None
        cells = {(p.i, p.j) for p in self.poses}
        free = {c for c in cells if world.occupied.get(c, agent) == agent}
        if here in cells:
            self.goal = min(
                (p for p in self.poses if (p.i, p.j) == here),
                key=lambda p: ((p.rotation - a.rotation) % 360 != 0, abs(p.horizon - a.horizon)),
            )
            return _teleport(a.i, a.j, self.goal.rotation, self.goal.horizon)
        targets = free or cells
        plan = self.plan
        if not plan or plan[-1] not in cells or world.occupied.get(plan[0], agent) != agent:
            plan = shortest_path(world, here, targets, avoid_agents=False)
            if plan is None:
                self.goal = None
                return None
            if self.budget < 0:
                self.budget = 2 * len(plan) + SLACK
            blocker = world.occupied.get(plan[0], agent)
            if blocker != agent:
                # Walking agents with lower indices have the right of way; go around the rest.
                yield_to = blocker in self.walking and blocker < agent
                detour = None if yield_to else shortest_path(world, here, targets, exclude=agent)
                if not detour or len(detour) > len(plan) + DETOUR:
                    self.goal = None
                    self.wanted = plan[0]
                    self.plan = []
                    return None
                plan = detour
        self.plan = plan
        route = plan
        nxt = route[0]
        if len(route) == 1:
            self.goal = min(
                (p for p in self.poses if (p.i, p.j) == nxt),
                key=lambda p: ((p.rotation - _heading(here, nxt)) % 360 != 0, abs(p.horizon)),
            )
            return _teleport(*nxt, self.goal.rotation, self.goal.horizon)
        self.goal = None
        return _teleport(*nxt, _heading(here, nxt), a.horizon)

    def observe(self, world: World, agent: int, result: ActionResult | None) -> None:
        self.ticks += 1
        if result is None and self.goal is None and self.budget < 0:
            # Never planned a route: no path leads there whatever the other agents do, so this
            # tick is not one spent blocked by them.
            self.finish(False, f"navigate {self.target} failed: no way there", SkillFailure.STUCK)
            return
        if result is None or not result.success:
            self.blocked += 1
            self.streak += 1
            if self.streak > PATIENCE:
                self.finish(
                    False,
                    f"navigate {self.target} failed: blocked by other agents",
                    SkillFailure.STUCK,
                )
            return
        self.streak = 0
        a = world.agents[agent]
        if self.plan and (a.i, a.j) == self.plan[0]:
            self.plan = self.plan[1:]
        if self.goal is not None and (a.i, a.j, a.rotation, a.horizon) == tuple(self.goal):
            self.finish(True, f"arrived where {self.target} is in view")
        elif 0 <= self.budget < self.ticks:
            self.finish(
                False,
                f"navigate {self.target} failed: took too long (other agents in the way)",
                SkillFailure.STUCK,
            )

    streak: int = 0


@dataclass
class Explore(Skill):
    """Walk to an unvisited cell a few steps away, away from the other agents (see
    :meth:`_frontier`), then look around (three quarter turns)."""

    visited: set[tuple[int, int]] = field(default_factory=set, repr=False)
    scans_left: int = 3
    arrived: bool = False
    destination: tuple[int, int] | None = None

    def next_action(self, world: World, agent: int) -> dict | None:
        a = world.agents[agent]
        here = (a.i, a.j)
        if self.destination is None:
            self.destination = self._frontier(world, here, agent)
            if self.destination is None:
                self.finish(True, "nothing left to explore")
                return None
        if here != self.destination:
            # Exploring is never urgent: wait for whoever is in the way rather than dodge around.
            path = shortest_path(world, here, {self.destination}, avoid_agents=False)
            if not path or world.occupied.get(path[0], agent) != agent:
                return None
            return _teleport(*path[0], _heading(here, path[0]), SCAN_HORIZON)
        return {"action": "RotateRight"}

    def _over_budget(self) -> bool:
        return self.ticks > EXPLORE_BUDGET

    def _frontier(self, world: World, here: tuple[int, int], agent: int) -> tuple[int, int] | None:
        """An unvisited cell to head for: among the first ``CANDIDATES`` unvisited cells at least
        ``STRIDE`` steps away (walking around other agents), the one farthest from the other
        agents, so that a team spreads out; else the nearest unvisited cell."""
        others = [(a.i, a.j) for k, a in enumerate(world.agents) if k != agent]
        dist = {here: 0}
        queue = [here]
        near, far = None, []
        for cell in queue:
            for dx, dz in HEADINGS.values():
                nxt = (cell[0] + dx, cell[1] + dz)
                if nxt in dist or nxt not in world.scene.reachable_set or nxt in others:
                    continue
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
                if nxt not in self.visited:
                    near = near or nxt
                    if dist[nxt] >= STRIDE:
                        far.append(nxt)
            if len(far) >= CANDIDATES:
                break
        if not far:
            return near

        def spread(c: tuple[int, int]) -> tuple[float, tuple[int, int]]:
            gap = min((abs(c[0] - o[0]) + abs(c[1] - o[1]) for o in others), default=0)
            return (gap - 0.5 * dist[c], c)

        return max(far, key=spread)

    def observe(self, world: World, agent: int, result: ActionResult | None) -> None:
        self.ticks += 1
        if self.finished:
            return
        if result is None or not result.success:
            self.blocked += 1
            if self.blocked > PATIENCE:
                self.finish(False, "explore failed: blocked by other agents", SkillFailure.STUCK)
            return
        if self._over_budget():
            self.finish(True, "explored (out of time)")
            return
        a = world.agents[agent]
        if (a.i, a.j) == self.destination:
            if self.arrived:
                self.scans_left -= 1
            self.arrived = True
            if self.scans_left <= 0:
                self.finish(True, "explored")
