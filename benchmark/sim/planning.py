"""Path planning on the reachable grid: interaction poses and shortest paths.

Scripted agents and skills use these to go where an object can be seen and reached.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from benchmark.sim.scene import CAMERA_STANDING, GRID_SIZE
from benchmark.sim.visibility import sees_box, visible_headings
from benchmark.sim.world import HEADINGS, World

HORIZONS = (0, 30, 60, -30)


class Pose(NamedTuple):
    """An agent pose on the grid: cell (i, j), heading and camera pitch in degrees."""

    i: int
    j: int
    rotation: int
    horizon: int


def sight_poses(world: World, index: int) -> list[Pose]:
    """Standing poses on the reachable grid from which object ``index`` is seen, ignoring
    where agents stand. Deterministic order: by cell, heading, pitch."""
    box = world.box(index)
    x0, x1, _, _, z0, z1 = box
    reach = world.visibility_distance
    cam = world.scene.agent_y + CAMERA_STANDING
    out = []
    for i, j in world.scene.reachable:
        x, z = i * GRID_SIZE, j * GRID_SIZE
        if not (x0 - reach <= x <= x1 + reach and z0 - reach <= z <= z1 + reach):
            continue
        for rotation, horizon in visible_headings(world.scene, x, z, cam, box, reach, world.fov):
            out.append(Pose(i, j, rotation, horizon))
    return out


def can_be_seen(world: World, index: int) -> bool:
    """Whether any standing pose on the grid sees object ``index`` (stops at the first)."""
    box = world.box(index)
    x0, x1, _, _, z0, z1 = box
    reach = world.visibility_distance
    cam = world.scene.agent_y + CAMERA_STANDING
    for i, j in world.scene.reachable:
        x, z = i * GRID_SIZE, j * GRID_SIZE
        if x0 - reach <= x <= x1 + reach and z0 - reach <= z <= z1 + reach:
            for h in HEADINGS:
                for v in HORIZONS:
                    if sees_box(world.scene, x, z, h, v, cam, box, reach, world.fov):
                        return True
    return False


def interaction_poses(world: World, agent_index: int, index: int) -> list[Pose]:
    """:func:`sight_poses` minus cells taken by agents other than ``agent_index`` (-1: any)."""
    return [
        p
        for p in sight_poses(world, index)
        if world.occupied.get((p.i, p.j), agent_index) == agent_index
    ]


def shortest_path(
    world: World,
    start: tuple[int, int],
    goals: set[tuple[int, int]],
    avoid_agents: bool = True,
    exclude: int = -1,
) -> list[tuple[int, int]] | None:
    """Breadth-first shortest path of cells from ``start`` to the nearest goal cell.

    Returns the cells after ``start`` (empty if ``start`` is a goal), or None if no goal can be
    reached. Cells held by agents other than ``exclude`` are walls when ``avoid_agents``.
    """
    if start in goals:
        return []
    reachable = world.scene.reachable_set
    blocked = {c for c, k in world.occupied.items() if k != exclude} if avoid_agents else set()
    previous: dict[tuple[int, int], tuple[int, int]] = {start: start}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for dx, dz in ((0, 1), (1, 0), (0, -1), (-1, 0)):
            nxt = (cell[0] + dx, cell[1] + dz)
            if nxt in previous or nxt not in reachable or nxt in blocked:
                continue
            previous[nxt] = cell
            if nxt in goals:
                path = [nxt]
                while previous[path[-1]] != start:
                    path.append(previous[path[-1]])
                return path[::-1]
            queue.append(nxt)
    return None


def step_towards(cell: tuple[int, int], nxt: tuple[int, int], rotation: float) -> list[dict]:
    """Primitive actions that turn to face the neighbouring cell ``nxt`` and step into it."""
    want = next(r for r, d in HEADINGS.items() if d == (nxt[0] - cell[0], nxt[1] - cell[1]))
    turn = (want - rotation) % 360
    actions: list[dict] = []
    if turn == 90:
        actions.append({"action": "RotateRight"})
    elif turn == 270:
        actions.append({"action": "RotateLeft"})
    elif turn:
        # 180, or any turn from a heading off the 90-degree grid.
        actions.append({"action": "RotateRight", "degrees": turn})
    actions.append({"action": "MoveAhead"})
    return actions
