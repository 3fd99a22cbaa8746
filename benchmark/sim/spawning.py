"""AI2-THOR's InitialRandomSpawn: re-place the pickupable objects from a seed.

Objects go to random compatible receptacles (the compatibility table in ``scenes/``, as
PutObject uses; never into a pickupable one such as a bowl) at spots from which some standing
pose sees them, with the machinery of :mod:`benchmark.sim.arrange`. The layout is a pure
function of the scene state and ``randomSeed``. An object that finds no place stays where it
is; that is not a failure, as in AI2-THOR.

Differences from AI2-THOR, all documented on the Controller: objectIds do not change (AI2-THOR
renames every object after its new position; here ids are stable, so goals and pre-set ids
keep working, while positions and ``parentReceptacles`` show the new layout); copies
(``numDuplicatesOfType`` above the count present) and moving furniture (``allowMoveable``)
fail with a message instead of being done; ``placeStationary`` has no effect (no physics).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmark.sim.arrange import randomize
from benchmark.sim.failures import Failure
from benchmark.sim.interaction import drop
from benchmark.sim.world import OK, ActionResult, World, failed


def known_types(world: World) -> frozenset[str]:
    """Object types AI2-THOR knows, as far as the recorded scenes and the facts tell."""
    facts = world.facts
    return frozenset(
        {
            *(world.scene.known_types or (s.object_type for s in world.specs)),
            *facts.compatible,
            *(t for types in facts.compatible.values() for t in types),
            *facts.derived_types,
        }
    )


def _strings(value: Any, action: str, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{action}: {name} must be a list of str")
    return value


def _duplicates(value: Any, action: str) -> list[tuple[str, int]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{action}: numDuplicatesOfType must be a list of dicts")
    out = []
    for n, entry in enumerate(value):
        if (
            not isinstance(entry, dict)
            or set(entry) != {"objectType", "count"}
            or not isinstance(entry["objectType"], str)
            or not isinstance(entry["count"], int)
            or isinstance(entry["count"], bool)
            or entry["count"] < 0
        ):
            raise ValueError(
                f"{action}: numDuplicatesOfType[{n}] must be {{'objectType': str, "
                "'count': non-negative int}"
            )
        out.append((entry["objectType"], entry["count"]))
    return out


def initial_random_spawn(
    world: World,
    a: int,
    action: str,
    randomSeed: int = 0,
    forceVisible: bool = False,
    placeStationary: bool = True,
    numDuplicatesOfType: list | None = None,
    excludedReceptacles: list | None = None,
    excludedObjectIds: list | None = None,
    objectIds: list | None = None,
    receptacleObjectIds: list | None = None,
    numPlacementAttempts: int = 5,
    allowFloor: bool = False,
    allowMoveable: bool = False,
) -> ActionResult:
    """Re-place pickupable objects among compatible receptacles, seeded by ``randomSeed``.

    Args:
        forceVisible: use only open receptacles (counters, tables, shelves), never inside
            fridges, cabinets or drawers.
        numDuplicatesOfType: ``[{objectType, count}]``: only the first ``count`` objects of the
            type (metadata order) move; a count above those present fails (no copies here).
        excludedReceptacles: receptacle types not used (the Floor is excluded unless
            ``allowFloor``).
        excludedObjectIds: objects that stay where they are.
        objectIds: if given, only these objects move.
        receptacleObjectIds: if given, only these receptacles are used.
        numPlacementAttempts: random spots tried per receptacle.
    """
    excluded_types = _strings(excludedReceptacles, action, "excludedReceptacles")
    excluded_ids = _strings(excludedObjectIds, action, "excludedObjectIds")
    only_ids = None if objectIds is None else _strings(objectIds, action, "objectIds")
    only_receptacles = (
        None
        if receptacleObjectIds is None
        else _strings(receptacleObjectIds, action, "receptacleObjectIds")
    )
    duplicates = _duplicates(numDuplicatesOfType, action)
    if numPlacementAttempts <= 0:
        return failed(Failure.BAD_ARGUMENT, "numPlacementAttempts must be a positive integer.")
    if allowMoveable:
        return failed(
            Failure.UNSUPPORTED,
            f"{action} failed: allowMoveable=True asks to move furniture, which the embedded "
            "simulator cannot do (furniture shapes the reachable grid)",
        )
    types = known_types(world)
    for name in excluded_types:
        if name not in types:
            return failed(
                Failure.BAD_ARGUMENT,
                f"invalid Object Type used in excludedReceptacles array: {name}",
            )
    for oid in [*excluded_ids, *(only_ids or ()), *(only_receptacles or ())]:
        if oid not in world.index_of or not world.objs[world.index_of[oid]].active:
            return failed(Failure.UNKNOWN_OBJECT, f"Cannot find sim object with id '{oid}'")
    pickupable = [s.index for s in world.specs if s.pickupable and world.objs[s.index].active]
    keep = {world.index_of[oid] for oid in excluded_ids}
    if only_ids is not None:
        chosen = {world.index_of[oid] for oid in only_ids}
        keep |= {k for k in pickupable if k not in chosen}
    for object_type, count in duplicates:
        if object_type not in types:
            return failed(
                Failure.BAD_ARGUMENT,
                f"invalid Object Type used in numDuplicatesOfType: {object_type}",
            )
        present = [k for k in pickupable if world.specs[k].object_type == object_type]
        if count > len(present):
            return failed(
                Failure.UNSUPPORTED,
                f"{action} failed: numDuplicatesOfType asks for {count} {object_type} and the "
                f"scene holds {len(present)}; the embedded simulator cannot create copies",
            )
        keep |= set(present[count:])
    if all(k in keep for k in pickupable):
        return failed(Failure.BAD_ARGUMENT, f"{action} failed: no pickupable objects to spawn")
    avoid = {
        s.index
        for s in world.specs
        if s.receptacle
        and (
            s.object_type in excluded_types
            or (s.object_type == "Floor" and not allowFloor)
            or (forceVisible and s.openable)
            or (only_receptacles is not None and s.object_id not in only_receptacles)
        )
    }
    # AI2-THOR lets go of held objects first so that they can be re-placed too.
    for k, agent in enumerate(world.agents):
        if agent.held >= 0:
            drop(world, k, action)
    randomize(
        world,
        np.random.default_rng(randomSeed % 2**32),
        keep=keep,
        avoid=avoid,
        attempts=numPlacementAttempts,
    )
    return OK
