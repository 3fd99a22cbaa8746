"""The AI2-THOR action set: each action's arguments, their validation, and its handler.

A malformed call (unknown action, unknown or missing argument, wrong argument type) raises
``ValueError`` naming the valid choices, as AI2-THOR does. Whether the action is possible is
decided by its handler and reported as data (:class:`ActionResult`).

:data:`ACTIONS` are what agents do; :data:`SETUP_ACTIONS` set a scene up (AI2-THOR clients run
them before an episode) and run through ``Controller.step`` only, never ``multi_step`` or an
environment's primitive actions. ``Initialize`` is a setup action the Controller handles itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmark.sim import interaction, navigation, placing, spawning, state_changes
from benchmark.sim.world import OK, ActionResult, World

NUMBER = (int, float)
OPTIONAL_LIST = (list, type(None))
# Actions that only move or turn the agent or its camera.
NAVIGATION = (
    "MoveAhead",
    "MoveBack",
    "MoveLeft",
    "MoveRight",
    "RotateLeft",
    "RotateRight",
    "LookUp",
    "LookDown",
)


@dataclass(frozen=True)
class ActionSpec:
    """Signature and handler of one action. Types map argument names to accepted types."""

    handler: Callable[..., ActionResult]
    required: Mapping[str, tuple[type, ...]] = field(default_factory=dict)
    optional: Mapping[str, tuple[type, ...]] = field(default_factory=dict)


def _noop(world: World, a: int, action: str) -> ActionResult:
    return OK


_OBJ = {"objectId": (str,)}
_FORCE = {"forceAction": (bool,)}
_MOVE = ActionSpec(navigation.move, optional={"moveMagnitude": NUMBER, **_FORCE})
_TURN = ActionSpec(navigation.rotate, optional={"degrees": NUMBER})
_LOOK = ActionSpec(navigation.look, optional={"degrees": NUMBER})
_POSE = {
    "position": (dict,),
    "rotation": (dict, int, float),
    "horizon": NUMBER,
    "standing": (bool,),
}


def _object_action(handler: Callable[..., ActionResult], **extra: tuple[type, ...]) -> ActionSpec:
    return ActionSpec(handler, required=_OBJ, optional={**_FORCE, **extra})


ACTIONS: dict[str, ActionSpec] = {
    "MoveAhead": _MOVE,
    "MoveBack": _MOVE,
    "MoveLeft": _MOVE,
    "MoveRight": _MOVE,
    "RotateLeft": _TURN,
    "RotateRight": _TURN,
    "LookUp": _LOOK,
    "LookDown": _LOOK,
    "Crouch": ActionSpec(navigation.posture),
    "Stand": ActionSpec(navigation.posture),
    "Teleport": ActionSpec(navigation.teleport, optional={**_POSE, **_FORCE}),
    "TeleportFull": ActionSpec(navigation.teleport, required=_POSE, optional=_FORCE),
    "GetReachablePositions": ActionSpec(navigation.reachable_positions),
    "PickupObject": _object_action(interaction.pickup, manualInteract=(bool,)),
    "PutObject": _object_action(interaction.put, placeStationary=(bool,)),
    "DropHandObject": ActionSpec(interaction.drop, optional=_FORCE),
    "OpenObject": _object_action(interaction.open_close, openness=NUMBER),
    "CloseObject": _object_action(interaction.open_close),
    "ToggleObjectOn": _object_action(state_changes.toggle),
    "ToggleObjectOff": _object_action(state_changes.toggle),
    "SliceObject": _object_action(state_changes.slice_object),
    "CookObject": _object_action(state_changes.set_flag),
    "BreakObject": _object_action(state_changes.break_object),
    "CleanObject": _object_action(state_changes.set_flag),
    "DirtyObject": _object_action(state_changes.set_flag),
    "FillObjectWithLiquid": ActionSpec(
        state_changes.fill, required={**_OBJ, "fillLiquid": (str,)}, optional=_FORCE
    ),
    "EmptyLiquidFromObject": _object_action(state_changes.set_flag),
    "UseUpObject": _object_action(state_changes.set_flag),
    "Pass": ActionSpec(_noop),
    "Done": ActionSpec(_noop),
}


SETUP_ACTIONS: dict[str, ActionSpec] = {
    "InitialRandomSpawn": ActionSpec(
        spawning.initial_random_spawn,
        optional={
            "randomSeed": (int,),
            "forceVisible": (bool,),
            "placeStationary": (bool,),
            "numDuplicatesOfType": OPTIONAL_LIST,
            "excludedReceptacles": OPTIONAL_LIST,
            "excludedObjectIds": OPTIONAL_LIST,
            "objectIds": OPTIONAL_LIST,
            "receptacleObjectIds": OPTIONAL_LIST,
            "numPlacementAttempts": (int,),
            "allowFloor": (bool,),
            "allowMoveable": (bool,),
        },
    ),
    "PlaceObjectAtPoint": ActionSpec(
        placing.place_object_at_point,
        required={**_OBJ, "position": (dict,)},
        optional={"rotation": (dict, int, float, type(None)), "forceKinematic": (bool,)},
    ),
    "SetObjectPoses": ActionSpec(
        placing.set_object_poses,
        required={"objectPoses": (list,)},
        optional={"placeStationary": (bool,)},
    ),
}
# Handled by the Controller (it re-creates the agents); listed so that errors can name it.
INITIALIZE = "Initialize"


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def validate(
    action: Any, kwargs: Mapping[str, Any], setup: bool = False
) -> tuple[str, ActionSpec, dict[str, Any]]:
    """Check an action call; returns (name, spec, arguments) or raises ValueError.

    ``setup``: whether :data:`SETUP_ACTIONS` are allowed here (``Controller.step``).
    """
    table = {**ACTIONS, **SETUP_ACTIONS} if setup else ACTIONS
    if isinstance(action, str) and not setup and (action in SETUP_ACTIONS or action == INITIALIZE):
        raise ValueError(
            f"{action} sets the scene up: run it with Controller.step, not as an agent's action"
        )
    if not isinstance(action, str) or action not in table:
        valid = sorted([*table, INITIALIZE] if setup else table)
        raise ValueError(f"unknown action {action!r}; valid actions are {valid}")
    spec = table[action]
    allowed = {**spec.required, **spec.optional}
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(
            f"{action}: unknown argument(s) {unknown}; "
            f"valid arguments are {sorted(allowed) or 'none'}"
        )
    missing = sorted(set(spec.required) - set(kwargs))
    if missing:
        raise ValueError(f"{action}: missing required argument(s) {missing}")
    for name, value in kwargs.items():
        if not _type_ok(value, allowed[name]):
            names = " or ".join(t.__name__ for t in allowed[name])
            raise ValueError(f"{action}: argument {name}={value!r} must be {names}")
    return action, spec, dict(kwargs)
