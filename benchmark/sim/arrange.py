"""Episode set-up on a fresh world: re-placing objects, putting them at recorded points,
hiding them, setting states (open, dirty), switching things on.

Everything draws from the caller's ``np.random.Generator``, so a seed fixes the layout.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from benchmark.sim.interaction import move_object, placement
from benchmark.sim.placing import place_object_at_point
from benchmark.sim.planning import can_be_seen
from benchmark.sim.state_changes import settle
from benchmark.sim.world import World


def reachable_by_sight(world: World, index: int) -> bool:
    """Whether some standing pose on the grid sees object ``index``. Furniture never moves, so
    its answer is cached per scene and sight range (Initialize can change the range)."""
    if world.specs[index].pickupable:
        return can_be_seen(world, index)
    cache = world.scene.furniture_in_sight
    key = (index, world.visibility_distance, world.fov)
    if key not in cache:
        cache[key] = can_be_seen(world, index)
    return cache[key]


def _receptacles(world: World, object_type: str, closed_only: bool) -> list[int]:
    out = []
    for spec in world.specs:
        if not spec.receptacle or spec.pickupable or not world.objs[spec.index].active:
            continue
        if closed_only and not spec.openable:
            continue
        if world.facts.accepts(spec.object_type, object_type):
            out.append(spec.index)
    return out


def relocate(
    world: World,
    index: int,
    rng: np.random.Generator,
    closed_only: bool = False,
    avoid: Collection[int] = (),
    attempts: int = 1,
) -> bool:
    """Move object ``index`` into a random compatible receptacle from which it can be seen.

    ``closed_only`` hides it in an openable receptacle, which is then closed. Receptacles in
    ``avoid`` are not used. Each receptacle gets up to ``attempts`` random spots. Returns False
    (and leaves it in place) if no receptacle works.
    """
    spec = world.specs[index]
    options = [r for r in _receptacles(world, spec.object_type, closed_only) if r not in avoid]
    for r in (options[k] for k in rng.permutation(len(options))):
        rspec, rstate = world.specs[r], world.objs[r]
        if not reachable_by_sight(world, r):
            continue
        was_open = rstate.is_open
        for _ in range(attempts):
            if rspec.openable:
                world.update(r, is_open=True, openness=1.0)
            x0, x1, _, _, z0, z1 = world.box(r)
            ax = float(rng.uniform(x0, x1))
            az = float(rng.uniform(z0, z1))
            old = world.objs[index]
            move_object(world, index, r, *placement(world, r, index, ax, az))
            if reachable_by_sight(world, index):
                if closed_only or (rspec.openable and not was_open):
                    world.update(r, is_open=False, openness=0.0)
                return True
            move_object(world, index, old.parent, old.x, old.y, old.z)
            if rspec.openable and not was_open:
                world.update(r, is_open=False, openness=0.0)
    return False


def randomize(
    world: World,
    rng: np.random.Generator,
    keep: Collection[int] = (),
    avoid: Collection[int] = (),
    attempts: int = 1,
) -> int:
    """Re-place every pickupable object (except ``keep``) among compatible receptacles (except
    ``avoid``), in the rearrangement-challenge style; returns how many moved. An object resting
    in a pickupable receptacle that is re-placed too moves with it. ``attempts``: random spots
    tried per receptacle."""
    moved = 0
    for spec in world.specs:
        k = spec.index
        if not spec.pickupable or k in keep or not world.objs[k].active:
            continue
        parent = world.objs[k].parent
        if parent >= 0 and world.specs[parent].pickupable and parent not in keep:
            continue
        moved += relocate(world, k, rng, avoid=avoid, attempts=attempts)
    return moved


def place_at_points(
    world: World, placements: Sequence[tuple[str, tuple[float, float, float]]]
) -> str | None:
    """Put objects at points with AI2-THOR's PlaceObjectAtPoint, in order: each ``(object,
    (x, y, z))`` names an objectId, or a type the scene holds exactly one active object of.
    Returns why the first one that fails failed (naming the object, the point and the
    simulator's message), or None when all succeed."""
    for ref, (x, y, z) in placements:
        if "|" in ref:
            object_id = ref
        else:
            ids = [
                s.object_id
                for s in world.specs
                if s.object_type == ref and world.objs[s.index].active
            ]
            if len(ids) != 1:
                return f"PlaceObjectAtPoint {ref}: {world.scene.name} holds {len(ids)}, not one"
            object_id = ids[0]
        result = place_object_at_point(
            world, 0, "PlaceObjectAtPoint", object_id, {"x": x, "y": y, "z": z}
        )
        if not result.success:
            return f"PlaceObjectAtPoint {object_id} at ({x}, {y}, {z}) failed: {result.error}"
    return None


def set_state(world: World, object_types: Collection[str], capability: str, **state: Any) -> None:
    """Set ``state`` (ObjState fields) on every active object of the given types that has
    ``capability`` (an ObjectSpec flag): opening cabinets, making bowls dirty."""
    for spec in world.specs:
        active = world.objs[spec.index].active
        if active and spec.object_type in object_types and getattr(spec, capability):
            world.update(spec.index, **state)


def switch_on(world: World, object_types: Collection[str]) -> None:
    """Switch on every toggleable object of the given types, then let heat and water act."""
    for spec in world.specs:
        if spec.toggleable and spec.object_type in object_types:
            world.update(spec.index, is_toggled=True)
    settle(world)
