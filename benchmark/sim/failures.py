"""Why an action failed: a structured reason beside AI2-THOR's ``errorMessage``.

AI2-THOR reports a failed action as text only. The simulator gives every failure a reason as
well, so that the environment and agents can act on it without parsing text, and declares which
reasons can never change: the same action on the same object, by an agent holding the same
thing, fails again whatever else happens (retrying it is futile).
"""

from __future__ import annotations

from enum import StrEnum


class Failure(StrEnum):
    """The reason an action failed."""

    UNKNOWN_OBJECT = "unknown_object"  # no object has this id
    GONE = "gone"  # the object left the scene (sliced, cracked)
    HELD_BY_SELF = "held_by_self"  # the agent itself holds the target
    HELD_BY_OTHER = "held_by_other"  # another agent holds the target
    ENCLOSED = "enclosed"  # the target is inside a closed receptacle
    NOT_VISIBLE = "not_visible"  # out of range, out of view or out of sight
    HANDS_FULL = "hands_full"  # the agent already holds an object
    HANDS_EMPTY = "hands_empty"  # the action needs a held object
    NEEDS_TOOL = "needs_tool"  # slicing needs a knife in hand
    NOT_PICKUPABLE = "not_pickupable"  # the object can never be picked up
    NOT_RECEPTACLE = "not_receptacle"  # nothing can ever be put in or on it
    RECEPTACLE_CLOSED = "receptacle_closed"  # open it first
    INCOMPATIBLE = "incompatible"  # the held object's type never goes in this receptacle type
    INCAPABLE = "incapable"  # the object lacks the property (not openable, not sliceable...)
    ALREADY = "already"  # the object is already in the state the action sets
    BROKEN = "broken"  # a broken object cannot be switched or filled
    BLOCKED = "blocked"  # another agent stands in the way
    UNREACHABLE = "unreachable"  # a wall, furniture or the edge of the grid is in the way
    OUT_OF_RANGE = "out_of_range"  # a camera angle or posture the agent cannot take
    OUT_OF_SCENE = "out_of_scene"  # a point outside the scene, or with no surface below it
    BAD_ARGUMENT = "bad_argument"  # an argument value AI2-THOR reports as a failed action
    UNSUPPORTED = "unsupported"  # valid in AI2-THOR, beyond the embedded simulator (copies...)


PERMANENT = frozenset(
    {
        Failure.UNKNOWN_OBJECT,
        Failure.GONE,
        Failure.NOT_PICKUPABLE,
        Failure.NOT_RECEPTACLE,
        Failure.INCOMPATIBLE,
        Failure.INCAPABLE,
        Failure.BROKEN,
        Failure.OUT_OF_SCENE,
        Failure.BAD_ARGUMENT,
        Failure.UNSUPPORTED,
    }
)
