"""A loaded iTHOR scene: static object specs, the initial object states, and the grids.

Scenes are immutable and cached per process; controllers copy the initial state.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import math
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

from benchmark.sim.catalog import normalize_scene

GRID_SIZE = 0.25
# Height of the agent's position above the floor, and of its camera above that position.
AGENT_HEIGHT = 0.9009995
CAMERA_STANDING = 0.675
CAMERA_CROUCHING = 0.075

# Metadata keys the simulator owns; every other recorded key is static and copied as recorded.
DYNAMIC_KEYS = frozenset(
    {
        "position",
        "axisAlignedBoundingBox",
        "objectOrientedBoundingBox",
        "parentReceptacles",
        "receptacleObjectIds",
        "isOpen",
        "openness",
        "isToggled",
        "isSliced",
        "isCooked",
        "isBroken",
        "isDirty",
        "isFilledWithLiquid",
        "fillLiquid",
        "isUsedUp",
        "temperature",
        "isPickedUp",
        "isMoving",
        "visible",
        "isInteractable",
        "distance",
    }
)
# Wall-mounted or hanging types: standing on the floor does not make their footprint open floor.
_NOT_FLOOR_FURNITURE = frozenset(
    {
        "Window",
        "Painting",
        "Mirror",
        "Curtains",
        "Blinds",
        "ShowerCurtain",
        "Poster",
        "LightSwitch",
    }
)


@dataclass(frozen=True, slots=True)
class ObjectSpec:
    """The fixed facts of one object instance.

    Attributes:
        index: position in the scene's object list.
        object_id, object_type: AI2-THOR's ``objectId`` and ``objectType``.
        offset: axis-aligned box centre minus the object's position (x, y, z), metres.
        half: half the box size (x, y, z), metres.
        controlled: indices of the objects this one switches (a StoveKnob's burners).
        record: the recorded metadata without the simulator-owned keys.
        rest: the position where ``aabb`` and ``oobb`` were recorded.
        aabb, oobb: the recorded bounding boxes (None for objects created by an action).
        blob: ``record`` plus the recorded boxes, marshalled; loading it is the fastest way to
            get a fresh deep copy for each metadata read.
        source: for an object created by an action, the index of the object it came from.
    """

    index: int
    object_id: str
    object_type: str
    pickupable: bool
    receptacle: bool
    openable: bool
    toggleable: bool
    sliceable: bool
    cookable: bool
    breakable: bool
    dirtyable: bool
    can_fill: bool
    can_be_used_up: bool
    is_heat_source: bool
    is_cold_source: bool
    offset: tuple[float, float, float]
    half: tuple[float, float, float]
    controlled: tuple[int, ...]
    record: dict
    rest: tuple[float, float, float]
    aabb: dict | None
    oobb: dict | None
    blob: bytes
    source: int = -1


class ObjState(NamedTuple):
    """The changing state of one object. Immutable: updates build a new tuple.

    ``x, y, z`` is the resting position; an object inside a held object moves with its holder
    and reports a position derived from the holder's pose. ``parent`` is the index of the
    receptacle it rests in directly (-1: none) and ``holder`` the agent holding it (-1: none).
    ``active`` is False once the object is gone (sliced into pieces or broken into another).
    """

    x: float
    y: float
    z: float
    parent: int
    holder: int
    is_open: bool
    openness: float
    is_toggled: bool
    is_sliced: bool
    is_cooked: bool
    is_broken: bool
    is_dirty: bool
    is_filled: bool
    fill_liquid: str | None
    is_used_up: bool
    temperature: str
    active: bool


@dataclass(frozen=True)
class Scene:
    """One iTHOR floor plan, ready to simulate.

    Grid cells are integer pairs (i, j) for the point (i * 0.25, j * 0.25) in metres.
    ``static_blob`` holds every object's static metadata record, marshalled as one list.
    """

    name: str
    floor_y: float
    specs: tuple[ObjectSpec, ...]
    initial: tuple[ObjState, ...]
    reachable: tuple[tuple[int, int], ...]
    reachable_set: frozenset[tuple[int, int]]
    removed_reachable: tuple[tuple[float, float, str], ...]
    sight_open: frozenset[tuple[int, int]]
    openable_poses: dict[str, tuple[float, float, float, float]]
    bounds: tuple[float, float, float, float]
    index_of: dict[str, int]
    static_blob: bytes
    _los: dict = field(default_factory=dict, repr=False, compare=False)
    furniture_in_sight: dict[tuple[int, float, float], bool] = field(
        default_factory=dict, repr=False, compare=False
    )
    # Every object type of the 120 recorded scenes (empty: unknown, use this scene's types).
    known_types: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    @property
    def agent_y(self) -> float:
        return self.floor_y + AGENT_HEIGHT

    def line_of_sight(self, ax: float, az: float, tx: float, tz: float) -> bool:
        """Whether the straight line from (ax, az) towards (tx, tz) stays in open space.

        Both ends are snapped first (the agent to its 0.25 m cell, the target to 0.125 m), so the
        answer is a pure function of the snapped pair and can be cached without making results
        depend on the order of queries. The last 0.25 m before the target are not checked, since
        the target itself may sit in a wall or a closed piece of furniture.
        """
        key = (round(ax * 4), round(az * 4), round(tx * 8), round(tz * 8))
        hit = self._los.get(key)
        if hit is not None:
            return hit
        ax, az, tx, tz = key[0] / 4, key[1] / 4, key[2] / 8, key[3] / 8
        dist = math.hypot(tx - ax, tz - az)
        steps = int((dist - GRID_SIZE) / 0.1)
        ok = True
        for k in range(1, steps + 1):
            f = k * 0.1 / dist
            cell = (round((ax + (tx - ax) * f) * 4), round((az + (tz - az) * f) * 4))
            if cell not in self.sight_open:
                ok = False
                break
        self._los[key] = ok
        return ok


def _cell(x: float, z: float) -> tuple[int, int]:
    return (round(x / GRID_SIZE), round(z / GRID_SIZE))


def largest_component(cells) -> tuple[tuple[int, int], ...]:
    """The largest 4-connected set of grid cells, sorted.

    A few recorded grids hold small pockets cut off from the main floor (behind furniture);
    agents could be stranded there, so only the main floor area is kept.
    """
    remaining = set(cells)
    best: set[tuple[int, int]] = set()
    while remaining:
        start = min(remaining)
        part, stack = {start}, [start]
        while stack:
            i, j = stack.pop()
            for nxt in ((i + 1, j), (i - 1, j), (i, j + 1), (i, j - 1)):
                if nxt in remaining and nxt not in part:
                    part.add(nxt)
                    stack.append(nxt)
        remaining -= part
        if len(part) > len(best):
            best = part
    return tuple(sorted(best))


def _sight_open(reachable: frozenset, objects: list[dict], floor_y: float) -> frozenset:
    """Cells a line of sight may cross: the reachable grid and the footprints of furniture
    standing on the floor (tables, counters, beds), each with one cell of margin."""
    open_cells = set()
    for i, j in reachable:
        for di in (-1, 0, 1):
            for dj in (-1, 0, 1):
                open_cells.add((i + di, j + dj))
    for o in objects:
        if o["pickupable"] or o["objectType"] in _NOT_FLOOR_FURNITURE or o["objectType"] == "Floor":
            continue
        box = o["axisAlignedBoundingBox"]
        c, s = box["center"], box["size"]
        if c["y"] - s["y"] / 2 > floor_y + 0.15:
            continue
        # One cell of margin: the gap between furniture and the nearest reachable cell is open.
        i0 = math.floor((c["x"] - s["x"] / 2) / GRID_SIZE)
        i1 = math.ceil((c["x"] + s["x"] / 2) / GRID_SIZE)
        j0 = math.floor((c["z"] - s["z"] / 2) / GRID_SIZE)
        j1 = math.ceil((c["z"] + s["z"] / 2) / GRID_SIZE)
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                open_cells.add((i, j))
    return frozenset(open_cells)


def spec_from_record(
    index: int, rec: dict, controlled: tuple[int, ...] = (), source: int = -1
) -> ObjectSpec:
    """Build an :class:`ObjectSpec` from a recorded (or derived) object dict."""
    box = rec["axisAlignedBoundingBox"]
    pos = rec["position"]
    record = {k: v for k, v in rec.items() if k not in DYNAMIC_KEYS and k != "parent"}
    aabb = box if source < 0 else None
    oobb = rec.get("objectOrientedBoundingBox") if source < 0 else None
    return ObjectSpec(
        index=index,
        object_id=rec["objectId"],
        object_type=rec["objectType"],
        pickupable=bool(rec["pickupable"]),
        receptacle=bool(rec["receptacle"]),
        openable=bool(rec["openable"]),
        toggleable=bool(rec["toggleable"]),
        sliceable=bool(rec["sliceable"]),
        cookable=bool(rec["cookable"]),
        breakable=bool(rec["breakable"]),
        dirtyable=bool(rec["dirtyable"]),
        can_fill=bool(rec["canFillWithLiquid"]),
        can_be_used_up=bool(rec["canBeUsedUp"]),
        is_heat_source=bool(rec["isHeatSource"]),
        is_cold_source=bool(rec["isColdSource"]),
        offset=(
            box["center"]["x"] - pos["x"],
            box["center"]["y"] - pos["y"],
            box["center"]["z"] - pos["z"],
        ),
        half=(box["size"]["x"] / 2, box["size"]["y"] / 2, box["size"]["z"] / 2),
        controlled=controlled,
        record=record,
        rest=(pos["x"], pos["y"], pos["z"]),
        aabb=aabb,
        oobb=oobb,
        blob=marshal.dumps(
            {**record, "axisAlignedBoundingBox": aabb, "objectOrientedBoundingBox": oobb}
        ),
        source=source,
    )


def state_from_record(rec: dict, parent: int) -> ObjState:
    pos = rec["position"]
    return ObjState(
        x=pos["x"],
        y=pos["y"],
        z=pos["z"],
        parent=parent,
        holder=-1,
        is_open=bool(rec["isOpen"]),
        openness=float(rec["openness"]),
        is_toggled=bool(rec["isToggled"]),
        is_sliced=bool(rec["isSliced"]),
        is_cooked=bool(rec["isCooked"]),
        is_broken=bool(rec["isBroken"]),
        is_dirty=bool(rec["isDirty"]),
        is_filled=bool(rec["isFilledWithLiquid"]),
        fill_liquid=rec["fillLiquid"],
        is_used_up=bool(rec["isUsedUp"]),
        temperature=rec["temperature"],
        active=True,
    )


def scene_from_dict(data: dict) -> Scene:
    """Build a :class:`Scene` from a compact scene file's content."""
    objects = data["objects"]
    index_of = {o["objectId"]: i for i, o in enumerate(objects)}
    specs, initial = [], []
    for i, rec in enumerate(objects):
        controlled = tuple(
            index_of[c] for c in (rec.get("controlledObjects") or ()) if c in index_of
        )
        specs.append(spec_from_record(i, rec, controlled))
        initial.append(state_from_record(rec, index_of.get(rec.get("parent"), -1)))
    reachable = largest_component(_cell(x, z) for x, z in data["reachable"])
    reachable_set = frozenset(reachable)
    floor = next((o for o in objects if o["objectType"] == "Floor"), None)
    if floor is not None:
        c, s = floor["axisAlignedBoundingBox"]["center"], floor["axisAlignedBoundingBox"]["size"]
        bounds = (
            c["x"] - s["x"] / 2,
            c["x"] + s["x"] / 2,
            c["z"] - s["z"] / 2,
            c["z"] + s["z"] / 2,
        )
    else:
        xs = [x for x, _ in data["reachable"]]
        zs = [z for _, z in data["reachable"]]
        bounds = (min(xs) - 0.5, max(xs) + 0.5, min(zs) - 0.5, max(zs) + 0.5)
    return Scene(
        name=data["scene"],
        floor_y=float(data["floor_y"]),
        specs=tuple(specs),
        initial=tuple(initial),
        reachable=reachable,
        reachable_set=reachable_set,
        removed_reachable=tuple(tuple(r) for r in data["removed_reachable"]),
        sight_open=_sight_open(reachable_set, objects, float(data["floor_y"])),
        openable_poses={k: tuple(v) for k, v in data["openable_poses"].items()},
        bounds=bounds,
        index_of=index_of,
        static_blob=marshal.dumps([marshal.loads(s.blob) for s in specs]),
    )


@lru_cache(maxsize=32)
def _load(name: str, cache_root: str | None) -> Scene:
    from benchmark.sim.scene_cache import ensure_scene_assets

    directory = ensure_scene_assets(cache_root)
    path = directory / f"{name}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RuntimeError(
            f"scene file {path} is unreadable ({err}); delete {directory} and run "
            "'python -m benchmark.sim.scene_cache' to rebuild it"
        ) from err
    types = frozenset(t for counts in _manifest(cache_root)["types"].values() for t in counts)
    return dataclasses.replace(scene_from_dict(data), known_types=types)


@lru_cache(maxsize=4)
def _manifest(cache_root: str | None) -> dict:
    from benchmark.sim.scene_cache import ensure_scene_assets

    return json.loads((ensure_scene_assets(cache_root) / "manifest.json").read_text())


def object_type_counts(
    scene: str, cache_root: str | os.PathLike[str] | None = None
) -> dict[str, int]:
    """How many objects of each type the recorded scene holds, without loading the scene."""
    return _manifest(str(cache_root) if cache_root else None)["types"][normalize_scene(scene)]


def load_scene(scene: str, cache_root: str | os.PathLike[str] | None = None) -> Scene:
    """Load an iTHOR scene by name (``FloorPlanN`` or ``FloorPlanN_physics``), cached.

    Fetches and builds the scene assets on first use.
    """
    return _load(normalize_scene(scene), str(cache_root) if cache_root else None)
