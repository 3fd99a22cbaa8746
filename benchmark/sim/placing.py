"""Putting objects at given points: AI2-THOR's PlaceObjectAtPoint and SetObjectPoses.

AI2-THOR drops a ray from the point onto the first collider below it and rests the object
there. Objects here are boxes, so the surface below a point is found among the receptacles (and
the Floor) whose footprint holds the point; the one found becomes the object's parent:

* a receptacle whose top is below the point, or at most :data:`ON_SLACK` above it (recorded
  positions sit on their surface), offers its top: a counter, a plate, a table, a fridge's top;
* a receptacle whose box holds the point offers its inside (a sofa's seat, a sink, a shelf, a
  fridge, a drawer): boxes have no inner surfaces, so the object keeps the point's height
  (raised to the box's bottom if need be), and the surface is taken to lie
  :data:`INSIDE_DEPTH` below the point.

The highest surface wins; of surfaces within :data:`SAME_LEVEL` of each other the one with the
smaller footprint wins (a plate on a counter holds what is put on it). Other furniture and
pickupable objects are no surfaces, and nothing checks that the object's box is clear of other
boxes (AI2-THOR fails a placement that collides). Put back at its recorded position, an object
finds its recorded receptacle for 95% of the pickupable objects of the 120 scenes (the rest
sit in desks and shelving units whose inner shelves a box cannot show).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from benchmark.sim.failures import Failure
from benchmark.sim.interaction import move_object
from benchmark.sim.state_changes import settle
from benchmark.sim.visibility import Box
from benchmark.sim.world import OK, ActionResult, World, failed

SAME_LEVEL = 0.005  # metres: surfaces this close in height count as one level
INSIDE_DEPTH = 0.03  # metres below a point inside a box where that box's surface is assumed
ON_SLACK = 0.02  # metres a point may sit below a top and still be on it (pivots at the bottom)
CEILING_MARGIN = 0.5  # metres above the tallest recorded object that still count as the scene


class Support(NamedTuple):
    """Where an object put at a point comes to rest: in receptacle ``parent`` with its
    position at height ``y`` (metres)."""

    parent: int
    y: float


def scene_bounds(world: World) -> Box:
    """The scene's extent: every object's box at rest (the recorded objects hold no walls or
    ceiling, so the top gets :data:`CEILING_MARGIN`)."""
    boxes = [world.box(s.index, s.rest) for s in world.scene.specs]
    return (
        min(b[0] for b in boxes),
        max(b[1] for b in boxes),
        min(b[2] for b in boxes),
        max(b[3] for b in boxes) + CEILING_MARGIN,
        min(b[4] for b in boxes),
        max(b[5] for b in boxes),
    )


def find_support(world: World, index: int, x: float, y: float, z: float) -> Support | None:
    """The surface below (x, y, z) on which object ``index`` rests (see the module docstring);
    None if there is none (the point is below the floor)."""
    spec = world.specs[index]
    lift = spec.half[1] - spec.offset[1]  # position height above the box's bottom
    moving = {index, *world.descendants(index)}
    best: tuple[float, float, int] | None = None  # (level, footprint area, candidate)
    options: dict[int, Support] = {}
    for r in world.specs:
        k = r.index
        if not r.receptacle or k in moving or not world.objs[k].active or world.carrier(k) >= 0:
            continue
        x0, x1, y0, y1, z0, z1 = world.box(k)
        if not (x0 <= x <= x1 and z0 <= z <= z1):
            continue
        if y >= y1 - ON_SLACK or (r.object_type == "Floor" and y >= y0 - ON_SLACK):
            level, support = y1, Support(k, y1 + lift)
        elif y >= y0 - ON_SLACK:
            level, support = y - INSIDE_DEPTH, Support(k, max(y, y0 + lift))
        else:
            continue
        options[k] = support
        area = (x1 - x0) * (z1 - z0)
        if best is None or level > best[0] + SAME_LEVEL:
            best = (level, area, k)
        elif level >= best[0] - SAME_LEVEL and (area, k) < (best[1], best[2]):
            best = (max(level, best[0]), area, k)
    return None if best is None else options[best[2]]


def _xyz(value: Any, action: str, name: str) -> tuple[float, float, float]:
    if not isinstance(value, dict) or any(
        not isinstance(value.get(k), int | float)
        or isinstance(value.get(k), bool)
        or not math.isfinite(value[k])
        for k in "xyz"
    ):
        raise ValueError(f"{action}: {name} must be a dict with numeric keys x, y and z")
    return float(value["x"]), float(value["y"]), float(value["z"])


def _check_rotation(value: Any, action: str) -> None:
    if value is None:
        return
    ok = (isinstance(value, int | float) and not isinstance(value, bool)) or (
        isinstance(value, dict)
        and all(
            isinstance(v, int | float) and not isinstance(v, bool) and k in "xyz"
            for k, v in value.items()
        )
    )
    values = value.values() if isinstance(value, dict) else [value]
    ok = ok and all(math.isfinite(v) for v in values)
    if not ok:
        raise ValueError(
            f"{action}: rotation must be a finite number or a dict of finite numbers x, y, z"
        )


def _outside_scene(world: World, x: float, y: float, z: float) -> str:
    """AI2-THOR's message when (x, y, z) lies outside the scene's bounds, else ''."""
    x0, x1, y0, y1, z0, z1 = scene_bounds(world)
    if x0 <= x <= x1 and y0 <= y <= y1 and z0 <= z <= z1:
        return ""
    return (
        f"Position coordinate ({x}, {y}, {z}) is not within scene bounds "
        f"(x {x0:.2f}..{x1:.2f}, y {y0:.2f}..{y1:.2f}, z {z0:.2f}..{z1:.2f})"
    )


def _free_hand(world: World, index: int) -> None:
    """Take ``index`` out of the hand holding it, if any (it is being put somewhere else)."""
    holder = world.objs[index].holder
    if holder >= 0:
        world.update(index, holder=-1)
        world.move_agent(holder, world.agents[holder]._replace(held=-1))


def place_object_at_point(
    world: World,
    a: int,
    action: str,
    objectId: str,
    position: dict,
    rotation: Any = None,
    forceKinematic: bool = False,
) -> ActionResult:
    """Put a pickupable object on the first surface below ``position`` (metres), whoever holds
    it and whatever the agents see. ``rotation`` is checked but not applied (object boxes keep
    their recorded orientation). ``actionReturn`` is the resting position unless
    ``forceKinematic``, as in AI2-THOR."""
    x, y, z = _xyz(position, action, "position")
    _check_rotation(rotation, action)
    index = world.index_of.get(objectId, -1)
    if index < 0 or not world.objs[index].active:
        return failed(Failure.UNKNOWN_OBJECT, f"Cannot find object with id {objectId}.")
    if not world.specs[index].pickupable:
        return failed(
            Failure.UNSUPPORTED,
            f"{action} failed: {objectId} is not pickupable; the embedded simulator moves only "
            "pickupable objects (furniture shapes the reachable grid)",
        )
    outside = _outside_scene(world, x, y, z)
    if outside:
        return failed(Failure.OUT_OF_SCENE, outside)
    support = find_support(world, index, x, y, z)
    if support is None:
        return failed(Failure.OUT_OF_SCENE, f"{action} failed: no surface below ({x}, {y}, {z})")
    _free_hand(world, index)
    move_object(world, index, support.parent, x, support.y, z)
    settle(world)
    rest = None if forceKinematic else {"x": x, "y": support.y, "z": z}
    return ActionResult(True, "", rest)


def set_object_poses(
    world: World, a: int, action: str, objectPoses: list, placeStationary: bool = True
) -> ActionResult:
    """AI2-THOR's SetObjectPoses: each pose ``{objectName, position, rotation}`` puts the
    pickupable or moveable object with that metadata ``name`` exactly at ``position``; every
    pickupable or moveable object not listed leaves the scene.

    Poses are applied even when another fails; the action then fails with the last error, as
    in AI2-THOR. Furniture (moveable, not pickupable) stays where it stands: a pose for it must
    be its current position. ``rotation`` is checked but not applied.
    """
    if not objectPoses:
        return failed(
            Failure.BAD_ARGUMENT,
            "objectPoses was not initialized correctly. Please make sure each element in the "
            "objectPoses list is initialized.",
        )
    poses = []
    for n, pose in enumerate(objectPoses):
        if not isinstance(pose, dict) or not isinstance(pose.get("objectName"), str):
            raise ValueError(f"{action}: objectPoses[{n}] must be a dict with a str objectName")
        extra = sorted(set(pose) - {"objectName", "position", "rotation"})
        if extra:
            raise ValueError(
                f"{action}: objectPoses[{n}] has unknown key(s) {extra}; "
                "valid keys are objectName, position, rotation"
            )
        _check_rotation(pose.get("rotation"), action)
        poses.append((pose["objectName"], _xyz(pose.get("position"), action, "position")))
    movable = {
        s.record["name"]: s.index
        for s in world.specs
        if (s.pickupable or s.record.get("moveable")) and world.objs[s.index].active
    }
    errors: list[tuple[Failure, str]] = []
    placed: dict[int, tuple[float, float, float]] = {}
    for name, point in poses:
        index = movable.get(name, -1)
        outside = _outside_scene(world, *point)
        if index >= 0 and outside and index not in placed:
            placed[index] = world.position(index)  # listed, so it stays where it is
            errors.append((Failure.OUT_OF_SCENE, f"{name}: {outside}"))
        elif index < 0:
            errors.append(
                (
                    Failure.UNKNOWN_OBJECT,
                    f"No Pickupable or Moveable object of name {name} found in scene.",
                )
            )
        elif index in placed:
            errors.append(
                (
                    Failure.UNSUPPORTED,
                    f"{name} is listed twice: AI2-THOR would add a copy, which the embedded "
                    "simulator cannot create",
                )
            )
        elif not world.specs[index].pickupable and math.dist(point, world.position(index)) > 0.05:
            placed[index] = world.position(index)  # listed, so it stays where it stands
            errors.append(
                (
                    Failure.UNSUPPORTED,
                    f"{name} is furniture (moveable, not pickupable): the embedded simulator "
                    "cannot move it, since it shapes the reachable grid",
                )
            )
        else:
            placed[index] = point
    for index in movable.values():
        _free_hand(world, index)
        if index not in placed:
            world.remove_object(index)
    for index, (x, y, z) in placed.items():
        if world.specs[index].pickupable:
            # Contents are listed (or removed) one by one, so each moves on its own.
            world.update(index, x=x, y=y, z=z, parent=-1, holder=-1)
    for index, (x, y, z) in placed.items():
        if world.specs[index].pickupable:
            support = find_support(world, index, x, y, z)
            world.update(index, parent=-1 if support is None else support.parent)
    settle(world)
    if errors:
        return failed(*errors[-1])
    return OK
