"""Object interaction: finding a target, picking up, putting, dropping, opening, closing."""

from __future__ import annotations

from benchmark.sim.failures import Failure
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.state_changes import settle
from benchmark.sim.world import OK, ActionResult, World, failed, find_target

PLACE_MARGIN = 0.1  # metres kept between a placed object and the receptacle's edge
# Receptacles made for particular objects (AI2-THOR's ObjectSpecificReceptacle): their object
# types hold even under forceAction, which lifts the compatibility table everywhere else.
OBJECT_SPECIFIC = frozenset(
    {"CoffeeMachine", "StoveBurner", "ToiletPaperHanger", "TowelHolder", "HandTowelHolder"}
)


def pickup(
    world: World,
    a: int,
    action: str,
    objectId: str,
    forceAction: bool = False,
    manualInteract: bool = False,
) -> ActionResult:
    agent = world.agents[a]
    if agent.held >= 0:
        return failed(
            Failure.HANDS_FULL,
            f"{action} failed: the agent is already holding {world.specs[agent.held].object_id}",
        )
    index, fail = find_target(world, a, action, objectId, forceAction)
    if fail:
        return fail
    if not world.specs[index].pickupable:
        return failed(Failure.NOT_PICKUPABLE, f"{action} failed: {objectId} is not pickupable")
    world.update(index, holder=a, parent=-1)
    world.move_agent(a, agent._replace(held=index))
    return OK


def placement(
    world: World, receptacle: int, obj: int, ax: float, az: float
) -> tuple[float, float, float]:
    """Resting position for ``obj`` in ``receptacle``, as close to the agent as fits.

    Closed-type receptacles (openable) hold objects at their centre height; surfaces hold them
    on top.
    """
    x0, x1, y0, y1, z0, z1 = world.box(receptacle)
    mx = min(PLACE_MARGIN, (x1 - x0) / 2)
    mz = min(PLACE_MARGIN, (z1 - z0) / 2)
    px = min(max(ax, x0 + mx), x1 - mx)
    pz = min(max(az, z0 + mz), z1 - mz)
    spec = world.specs[obj]
    bottom = (y0 + y1) / 2 - spec.half[1] if world.specs[receptacle].openable else y1
    return px - spec.offset[0], bottom + spec.half[1] - spec.offset[1], pz - spec.offset[2]


def put(
    world: World,
    a: int,
    action: str,
    objectId: str,
    forceAction: bool = False,
    placeStationary: bool = True,
) -> ActionResult:
    """Put the held object in or on a receptacle. ``forceAction`` also lifts the compatibility
    table (not for :data:`OBJECT_SPECIFIC` receptacles), as AI2-THOR does; a closed receptacle
    or an empty hand still fails."""
    agent = world.agents[a]
    if agent.held < 0:
        return failed(Failure.HANDS_EMPTY, f"{action} failed: the agent is not holding any object")
    index, fail = find_target(world, a, action, objectId, forceAction)
    if fail:
        return fail
    rec, held = world.specs[index], world.specs[agent.held]
    if not rec.receptacle:
        return failed(Failure.NOT_RECEPTACLE, f"{action} failed: {objectId} is not a receptacle")
    if rec.openable and not world.objs[index].is_open:
        return failed(Failure.RECEPTACLE_CLOSED, f"{action} failed: {objectId} is closed")
    forced = forceAction and rec.object_type not in OBJECT_SPECIFIC
    if not forced and not world.facts.accepts(rec.object_type, held.object_type):
        return failed(
            Failure.INCOMPATIBLE,
            f"{action} failed: a {held.object_type} cannot be placed in a {rec.object_type}",
        )
    x, y, z = placement(world, index, agent.held, agent.i * GRID_SIZE, agent.j * GRID_SIZE)
    release(world, a, index, x, y, z)
    return OK


def move_object(world: World, index: int, parent: int, x: float, y: float, z: float) -> None:
    """Rest ``index`` at (x, y, z) in ``parent``; its contents keep their offsets."""
    old = world.objs[index]
    dx, dy, dz = x - old.x, y - old.y, z - old.z
    for k in world.descendants(index):
        st = world.objs[k]
        world.update(k, x=st.x + dx, y=st.y + dy, z=st.z + dz)
    world.update(index, x=x, y=y, z=z, parent=parent, holder=-1)


def release(world: World, a: int, parent: int, x: float, y: float, z: float) -> None:
    """Set agent ``a``'s held object down at (x, y, z) in ``parent``."""
    agent = world.agents[a]
    move_object(world, agent.held, parent, x, y, z)
    world.move_agent(a, agent._replace(held=-1))
    settle(world)


def drop(world: World, a: int, action: str, forceAction: bool = False) -> ActionResult:
    agent = world.agents[a]
    if agent.held < 0:
        return failed(Failure.HANDS_EMPTY, f"{action} failed: the agent is not holding any object")
    floor = world.index_of.get(_floor_id(world), -1)
    spec = world.specs[agent.held]
    x = agent.i * GRID_SIZE - spec.offset[0]
    z = agent.j * GRID_SIZE - spec.offset[2]
    y = world.scene.floor_y + spec.half[1] - spec.offset[1]
    release(world, a, floor, x, y, z)
    return OK


def _floor_id(world: World) -> str:
    return next((s.object_id for s in world.specs if s.object_type == "Floor"), "")


def open_close(
    world: World,
    a: int,
    action: str,
    objectId: str,
    openness: float = 1.0,
    forceAction: bool = False,
) -> ActionResult:
    opening = action == "OpenObject"
    if opening and not 0.0 < openness <= 1.0:
        raise ValueError(f"{action}: openness={openness} must be in (0, 1]")
    index, fail = find_target(world, a, action, objectId, forceAction, allow_held=True)
    if fail:
        return fail
    if not world.specs[index].openable:
        return failed(Failure.INCAPABLE, f"{action} failed: {objectId} is not openable")
    st = world.objs[index]
    if opening and st.is_open and st.openness == openness:
        return failed(Failure.ALREADY, f"{action} failed: {objectId} is already open")
    if not opening and not st.is_open:
        return failed(Failure.ALREADY, f"{action} failed: {objectId} is already closed")
    world.update(index, is_open=opening, openness=openness if opening else 0.0)
    return OK
