"""The iTHOR scene catalogue: the 120 FloorPlan names and their spellings."""

from __future__ import annotations

import re

# (room type, first FloorPlan number); each room type has 30 floor plans numbered from there.
ROOM_TYPES: tuple[tuple[str, int], ...] = (
    ("kitchens", 1),
    ("living_rooms", 201),
    ("bedrooms", 301),
    ("bathrooms", 401),
)
PLANS_PER_ROOM_TYPE = 30

_NAME = re.compile(r"^FloorPlan(\d+)(_physics)?$")


def ithor_scenes(room_type: str | None = None) -> list[str]:
    """The iTHOR scene names, in AI2-THOR order (``FloorPlan1`` .. ``FloorPlan430``).

    Args:
        room_type: one of ``kitchens``, ``living_rooms``, ``bedrooms``, ``bathrooms``, or None
            for all 120.
    """
    valid = [name for name, _ in ROOM_TYPES]
    if room_type is not None and room_type not in valid:
        raise ValueError(f"room_type={room_type!r} is not one of {valid}")
    return [
        f"FloorPlan{first + i}"
        for name, first in ROOM_TYPES
        if room_type in (None, name)
        for i in range(PLANS_PER_ROOM_TYPE)
    ]


def room_type_of(scene: str) -> str:
    """The room type of an iTHOR scene name (either spelling)."""
    number = int(_NAME.match(normalize_scene(scene)).group(1))  # type: ignore[union-attr]
    return next(name for name, first in ROOM_TYPES if first <= number < first + 100)


def normalize_scene(scene: str) -> str:
    """Map ``FloorPlanN`` or ``FloorPlanN_physics`` to ``FloorPlanN``.

    Raises:
        ValueError: naming the valid scenes, if ``scene`` is not an iTHOR floor plan.
    """
    match = _NAME.match(scene) if isinstance(scene, str) else None
    if match is not None:
        number = int(match.group(1))
        for _, first in ROOM_TYPES:
            if first <= number < first + PLANS_PER_ROOM_TYPE:
                return f"FloorPlan{number}"
    raise ValueError(
        f"unknown scene {scene!r}: valid scenes are FloorPlan1-30 (kitchens), FloorPlan201-230 "
        "(living rooms), FloorPlan301-330 (bedrooms) and FloorPlan401-430 (bathrooms), "
        "optionally with the suffix '_physics'"
    )


def type_of_id(object_id: str) -> str:
    """The object type an AI2-THOR objectId names: ``Apple|...`` -> ``Apple``, and for parts
    ``Sink|...|SinkBasin`` -> ``SinkBasin``, ``Bread|...|BreadSliced_2`` -> ``BreadSliced``."""
    parts = object_id.split("|")
    if len(parts) > 4:
        return parts[-1].split("_")[0]
    return parts[0]
