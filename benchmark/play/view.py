"""What a seat's page shows of the world: a top-down map of what its agent has seen, and the
checklist its observability allows.

Under partial observability the map draws the floor cells the agent has had in sight (every
cell within its visibility distance, with a clear line of sight, of a cell it has stood on),
the objects it knows (seen, named by the instruction or in a message it received), drawn where
they are now, and its own agent; the checklist is the task's goal clauses, their progress
hidden. Under full observability the map is the whole top-down view and the checklist shows
every grounded atom and whether it holds.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass

from benchmark.env.views import TaskInfo
from benchmark.sim.render import top_down
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import World

PIXELS_PER_METRE = 90


class SightMap:
    """The floor cells an agent has had in sight, grown from the cells it has stood on (each
    stood-on cell is worked out once)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.stood: set[tuple[int, int]] = set()
        self.cells: set[tuple[int, int]] = set()

    def update(self, stood: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
        """Take in the cells stood on so far; the cells seen so far."""
        scene, reach = self.world.scene, self.world.visibility_distance
        cells = int(reach / GRID_SIZE) + 1
        for i, j in set(stood) - self.stood:
            self.stood.add((i, j))
            ax, az = i * GRID_SIZE, j * GRID_SIZE
            for ci, cj in scene.reachable:
                if abs(ci - i) > cells or abs(cj - j) > cells or (ci, cj) in self.cells:
                    continue
                x, z = ci * GRID_SIZE, cj * GRID_SIZE
                near = (x - ax) ** 2 + (z - az) ** 2 <= reach**2
                if near and scene.line_of_sight(ax, az, x, z):
                    self.cells.add((ci, cj))
        return self.cells


def map_png(world: World, agent: int, full: bool, cells: set, known: set[str]) -> bytes:
    """The PNG of what agent ``agent`` has seen (everything when ``full``)."""
    if full:
        image = top_down(world, pixels_per_metre=PIXELS_PER_METRE)
    else:
        me = world.agents[agent]
        image = top_down(
            world,
            pixels_per_metre=PIXELS_PER_METRE,
            agents=(agent,),
            cells=cells | {(me.i, me.j)},
            objects={s.index for s in world.specs if s.object_id in known},
        )
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@dataclass(frozen=True)
class ChecklistLine:
    """One line of a seat's checklist: its text, and whether it holds (None: hidden)."""

    text: str
    done: bool | None


def checklist(info: TaskInfo) -> list[ChecklistLine]:
    """The checklist a seat sees: grounded atoms with their state under full observability,
    the goal clauses with their progress hidden under partial observability."""
    view = info.privileged
    if view is None:
        return [ChecklistLine(text, None) for text in info.goal]
    return [
        ChecklistLine(atom.key, bool(held))
        for atom, held in zip(view.checklist, view.satisfied(), strict=True)
    ]
