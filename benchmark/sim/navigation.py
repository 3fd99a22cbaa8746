"""Navigation actions: moving on the grid, turning, looking, posture, teleporting."""

from __future__ import annotations

from benchmark.sim.failures import Failure
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import HEADINGS, OK, ActionResult, World, failed

MIN_HORIZON, MAX_HORIZON = -30.0, 60.0

# Direction of each move relative to the heading (dx, dz): ahead, back, left, right.
_MOVES = {
    "MoveAhead": lambda dx, dz: (dx, dz),
    "MoveBack": lambda dx, dz: (-dx, -dz),
    "MoveLeft": lambda dx, dz: (-dz, dx),
    "MoveRight": lambda dx, dz: (dz, -dx),
}


def grid_steps(magnitude: float, what: str) -> int:
    """Number of 0.25 m cells in ``magnitude``; raises ValueError if it is not a multiple."""
    steps = round(magnitude / GRID_SIZE)
    if steps < 1 or abs(steps * GRID_SIZE - magnitude) > 1e-6:
        raise ValueError(f"{what}={magnitude} must be a positive multiple of gridSize={GRID_SIZE}")
    return steps


def right_angles(degrees: float, what: str) -> int:
    """``degrees`` as a multiple of 90 in [0, 360); raises ValueError otherwise."""
    if abs(degrees / 90 - round(degrees / 90)) > 1e-6:
        raise ValueError(f"{what}={degrees} must be a multiple of 90 degrees on the 0.25 m grid")
    return round(degrees) % 360


def move(
    world: World, a: int, action: str, moveMagnitude: float = GRID_SIZE, forceAction: bool = False
) -> ActionResult:
    """Move ``moveMagnitude`` metres; all or nothing. ``forceAction`` cannot pass through walls."""
    agent = world.agents[a]
    dx, dz = _MOVES[action](*HEADINGS[agent.rotation])
    i, j = agent.i, agent.j
    for _ in range(grid_steps(moveMagnitude, "moveMagnitude")):
        i, j = i + dx, j + dz
        if (i, j) not in world.scene.reachable_set:
            return failed(
                Failure.UNREACHABLE,
                f"{action} blocked: ({i * GRID_SIZE:.2f}, {j * GRID_SIZE:.2f}) is not a "
                "reachable position (wall or furniture)",
            )
        other = world.occupied.get((i, j), a)
        if other != a:
            return failed(
                Failure.BLOCKED,
                f"{action} blocked: agent {other} is standing at "
                f"({i * GRID_SIZE:.2f}, {j * GRID_SIZE:.2f})",
                other,
            )
    world.move_agent(a, agent._replace(i=i, j=j))
    return OK


def rotate(world: World, a: int, action: str, degrees: float = 90) -> ActionResult:
    agent = world.agents[a]
    turn = right_angles(degrees, "degrees")
    sign = 1 if action == "RotateRight" else -1
    world.move_agent(a, agent._replace(rotation=(agent.rotation + sign * turn) % 360))
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
    """Set any of position, rotation, horizon and posture; other agents still block cells."""
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
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(f"{action}: rotation must be a number or a dict with key 'y'")
        rot = right_angles(float(value), "rotation")
    hor = agent.horizon
    if horizon is not None:
        if not MIN_HORIZON <= horizon <= MAX_HORIZON:
            return failed(
                Failure.OUT_OF_RANGE,
                f"{action} failed: horizon {horizon:g} is outside "
                f"[{MIN_HORIZON:g}, {MAX_HORIZON:g}]",
            )
        hor = float(horizon)
    stand = agent.standing if standing is None else bool(standing)
    world.move_agent(a, agent._replace(i=i, j=j, rotation=rot, horizon=hor, standing=stand))
    return OK


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
