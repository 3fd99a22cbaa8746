"""Navigation actions: moving on the grid, turning, looking, posture, teleporting.

Headings are exact: RotateLeft/RotateRight take any non-zero number of degrees and Teleport any
yaw, as in AI2-THOR. Agents still stand on the 0.25 m grid (AI2-THOR's ``snapToGrid``), so a
move goes ``moveMagnitude`` metres along the agent's facing and the end point is rounded to the
nearest grid point, as AI2-THOR does under ``snapToGrid``: on a heading within 30 degrees of an
axis a 0.25 m step goes along that axis, nearer the diagonal it goes to the diagonal neighbour.
The path visits the cells between start and end (a diagonal step also needs both cells beside
it free, so an agent never cuts a corner).
"""

from __future__ import annotations

import math

from benchmark.sim.failures import Failure
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import OK, ActionResult, World, facing, failed

MIN_HORIZON, MAX_HORIZON = -30.0, 60.0
# Heading offset of each move from the agent's facing, degrees clockwise seen from above.
_MOVE_TURN = {"MoveAhead": 0, "MoveRight": 90, "MoveBack": 180, "MoveLeft": 270}
# AI2-THOR's wording for a zero turn (its typo included).
ZERO_TURN = (
    "Cannot rotate by 0 degrees as this previously defaulted to rotating by a diferent amount."
)


def grid_steps(magnitude: float, what: str) -> int:
    """Number of 0.25 m cells in ``magnitude``; raises ValueError if it is not a multiple."""
    steps = round(magnitude / GRID_SIZE)
    if steps < 1 or abs(steps * GRID_SIZE - magnitude) > 1e-6:
        raise ValueError(f"{what}={magnitude} must be a positive multiple of gridSize={GRID_SIZE}")
    return steps


def heading(degrees: float) -> float:
    """``degrees`` normalised to [0, 360); an int when it is a whole number of degrees."""
    value = float(degrees) % 360.0
    whole = round(value)
    return whole % 360 if abs(value - whole) < 1e-6 else value


def path_cells(i: int, j: int, rotation: float, magnitude: float) -> list[tuple[int, int]]:
    """Cells an agent at (i, j) facing ``rotation`` passes moving ``magnitude`` metres ahead:
    the end is the facing times the distance rounded to the grid (ties to even), the cells
    between follow the straight line. Never empty for ``magnitude`` >= 0.25."""
    dx, dz = facing(heading(rotation))
    di = round(round(dx * magnitude / GRID_SIZE, 6))
    dj = round(round(dz * magnitude / GRID_SIZE, 6))
    n = max(abs(di), abs(dj))
    return [(i + round(di * s / n), j + round(dj * s / n)) for s in range(1, n + 1)]


def move(
    world: World, a: int, action: str, moveMagnitude: float = GRID_SIZE, forceAction: bool = False
) -> ActionResult:
    """Move ``moveMagnitude`` metres; all or nothing. ``forceAction`` cannot pass through walls."""
    agent = world.agents[a]
    grid_steps(moveMagnitude, "moveMagnitude")
    cells = path_cells(agent.i, agent.j, agent.rotation + _MOVE_TURN[action], moveMagnitude)
    i, j = agent.i, agent.j
    for ni, nj in cells:
        # A diagonal step passes between the two cells beside it: both must be open floor.
        between = [(ni, j), (i, nj)] if ni != i and nj != j else []
        for ci, cj in [*between, (ni, nj)]:
            if (ci, cj) not in world.scene.reachable_set:
                return failed(
                    Failure.UNREACHABLE,
                    f"{action} blocked: ({ci * GRID_SIZE:.2f}, {cj * GRID_SIZE:.2f}) is not a "
                    "reachable position (wall or furniture)",
                )
            other = world.occupied.get((ci, cj), a)
            if other != a:
                return failed(
                    Failure.BLOCKED,
                    f"{action} blocked: agent {other} is standing at "
                    f"({ci * GRID_SIZE:.2f}, {cj * GRID_SIZE:.2f})",
                    other,
                )
        i, j = ni, nj
    world.move_agent(a, agent._replace(i=i, j=j))
    return OK


def rotate(world: World, a: int, action: str, degrees: float | None = None) -> ActionResult:
    """Turn by ``degrees`` (default: the ``rotateStepDegrees`` Initialize set, 90); any non-zero
    amount, negative turns the other way. Zero raises ValueError, as AI2-THOR refuses it."""
    turn = world.rotate_step if degrees is None else degrees
    if not math.isfinite(turn):
        raise ValueError(f"{action}: degrees={degrees!r} must be a finite number")
    if turn == 0:
        raise ValueError(f"{action}: degrees=0. {ZERO_TURN}")
    agent = world.agents[a]
    sign = 1 if action == "RotateRight" else -1
    world.move_agent(a, agent._replace(rotation=heading(agent.rotation + sign * turn)))
    return OK


def look(world: World, a: int, action: str, degrees: float = 30) -> ActionResult:
    agent = world.agents[a]
    horizon = agent.horizon + (degrees if action == "LookDown" else -degrees)
    if not MIN_HORIZON <= horizon <= MAX_HORIZON:
        return failed(
            Failure.OUT_OF_RANGE,
            f"{action} failed: cameraHorizon {horizon:g} would leave "
            f"[{MIN_HORIZON:g}, {MAX_HORIZON:g}]",
        )
    world.move_agent(a, agent._replace(horizon=horizon))
    return OK


def posture(world: World, a: int, action: str) -> ActionResult:
    agent = world.agents[a]
    standing = action == "Stand"
    if agent.standing == standing:
        return failed(Failure.ALREADY, f"{action} failed: the agent is already {action.lower()}ing")
    world.move_agent(a, agent._replace(standing=standing))
    return OK


def teleport(
    world: World,
    a: int,
    action: str,
    position: dict | None = None,
    rotation: dict | float | None = None,
    horizon: float | None = None,
    standing: bool | None = None,
    forceAction: bool = False,
) -> ActionResult:
    """Set any of position, rotation (any yaw, degrees), horizon and posture; other agents still
    block cells. A rotation dict with pitch or roll (x, z) fails, as in AI2-THOR."""
    agent = world.agents[a]
    i, j = agent.i, agent.j
    if position is not None:
        missing = [k for k in ("x", "z") if not isinstance(position.get(k), int | float)]
        if missing:
            raise ValueError(f"{action}: position needs numeric keys x and z (y is optional)")
        x, z = float(position["x"]), float(position["z"])
        i, j = round(x / GRID_SIZE), round(z / GRID_SIZE)
        if abs(i * GRID_SIZE - x) > 0.01 or abs(j * GRID_SIZE - z) > 0.01:
            return failed(
                Failure.UNREACHABLE, f"{action} failed: ({x}, {z}) is not on the 0.25 m grid"
            )
        if (i, j) not in world.scene.reachable_set:
            return failed(
                Failure.UNREACHABLE, f"{action} failed: ({x}, {z}) is not a reachable position"
            )
        other = world.occupied.get((i, j), a)
        if other != a:
            return failed(
                Failure.BLOCKED, f"{action} failed: agent {other} is standing at ({x}, {z})", other
            )
    rot = agent.rotation
    if rotation is not None:
        value = rotation.get("y") if isinstance(rotation, dict) else rotation
        if not _finite(value):
            raise ValueError(f"{action}: rotation must be a number or a dict with key 'y'")
        tilt = [rotation.get(k, 0) for k in ("x", "z")] if isinstance(rotation, dict) else [0, 0]
        if not all(_finite(t) for t in tilt):
            raise ValueError(f"{action}: rotation x and z must be numbers")
        if any(abs(t) >= 0.01 for t in tilt):
            return failed(
                Failure.OUT_OF_RANGE,
                f"{action} failed: No agents currently can change in pitch or roll. So, you must "
                f"set rotation(x=0, y=yaw, z=0). You gave ({tilt[0]}, {value}, {tilt[1]}).",
            )
        rot = heading(value)
    hor = agent.horizon
    if horizon is not None:
        if not MIN_HORIZON <= horizon <= MAX_HORIZON:
            return failed(
                Failure.OUT_OF_RANGE,
                f"{action} failed: Each horizon must be in [{MIN_HORIZON:g}:{MAX_HORIZON:g}]. "
                f"You gave {horizon:g}.",
            )
        hor = float(horizon)
    stand = agent.standing if standing is None else bool(standing)
    world.move_agent(a, agent._replace(i=i, j=j, rotation=rot, horizon=hor, standing=stand))
    return OK


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def reachable_positions(world: World, a: int, action: str) -> ActionResult:
    """Every reachable grid position not taken by another agent, as AI2-THOR dicts."""
    y = world.scene.agent_y
    return ActionResult(
        True,
        "",
        [
            {"x": i * GRID_SIZE, "y": y, "z": j * GRID_SIZE}
            for i, j in world.scene.reachable
            if world.occupied.get((i, j), a) == a
        ],
    )
