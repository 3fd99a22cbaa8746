"""Build the embedded scene files from the recorded iTHOR metadata and the ALFWorld layouts.

Inputs (unpacked by :mod:`benchmark.assets`):

* ``ai2thor-object-metadata.json``: AI2-THOR's recorded ``metadata["objects"]`` per floor plan,
  under the keys ``kitchens``, ``living_rooms``, ``bedrooms`` and ``bathrooms``; list index i is
  FloorPlan{i+1}, {201+i}, {301+i}, {401+i}.
* ``FloorPlanN-layout.npy``: reachable (x, z) agent positions on the 0.25 m grid.
* ``FloorPlanN-openable.json``: objectId -> [x, z, rotation, horizon] interaction poses.

Output: one ``FloorPlanN.json`` per scene plus ``manifest.json``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from benchmark.paths import write_atomically
from benchmark.sim.catalog import PLANS_PER_ROOM_TYPE, ROOM_TYPES

SCENE_FORMAT = 2

# Keys of a recorded object that the simulator recomputes per agent, so they are not stored.
PER_AGENT_KEYS = ("visible", "isInteractable", "distance")
# A non-pickupable object whose box starts this close to the floor top stands on the floor.
FLOOR_STANDING_TOLERANCE = 0.15


def scene_files_dir(cache_root: Path) -> Path:
    return cache_root / f"scenes-v{SCENE_FORMAT}"


def scenes_are_built(out_dir: Path) -> bool:
    manifest = out_dir / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        data = json.loads(manifest.read_text())
    except json.JSONDecodeError:
        return False
    return (
        data.get("format") == SCENE_FORMAT
        and all((out_dir / f"{name}.json").is_file() for name in data.get("scenes", []))
        and len(data.get("scenes", [])) == len(ROOM_TYPES) * PLANS_PER_ROOM_TYPE
    )


def floor_top(objects: list[dict]) -> float:
    """Height of the top of the scene's Floor object, in metres."""
    floors = [o for o in objects if o["objectType"] == "Floor"]
    if not floors:
        return 0.0
    box = floors[0]["axisAlignedBoundingBox"]
    return box["center"]["y"] + box["size"]["y"] / 2


def floor_standing(objects: list[dict], top: float) -> list[dict]:
    """Non-pickupable objects whose bounding box reaches down to the floor."""
    out = []
    for o in objects:
        if o["pickupable"] or o["objectType"] == "Floor":
            continue
        box = o["axisAlignedBoundingBox"]
        if box["center"]["y"] - box["size"]["y"] / 2 <= top + FLOOR_STANDING_TOLERANCE:
            out.append(o)
    return out


def inside_footprint(x: float, z: float, obj: dict) -> bool:
    box = obj["axisAlignedBoundingBox"]
    return (
        abs(x - box["center"]["x"]) < box["size"]["x"] / 2
        and abs(z - box["center"]["z"]) < box["size"]["z"] / 2
    )


def filter_reachable(
    points: np.ndarray, objects: list[dict]
) -> tuple[list[list[float]], list[list]]:
    """Drop the grid points that fall inside a floor-standing object's box.

    The ALFWorld grid was recorded on an older THOR build; about 1% of its points now lie
    inside furniture. Returns (kept points, removed points with the blocking objectId).
    """
    standing = floor_standing(objects, floor_top(objects))
    kept, removed = [], []
    for x, z in points.tolist():
        blocker = next((o["objectId"] for o in standing if inside_footprint(x, z, o)), None)
        if blocker is None:
            kept.append([x, z])
        else:
            removed.append([x, z, blocker])
    return kept, removed


def _ancestors(oid: str, parents: dict[str, list[str]], limit: int = 16) -> set[str]:
    seen: set[str] = set()
    frontier = list(parents.get(oid, []))
    while frontier and len(seen) < limit * 8:
        nxt = frontier.pop()
        if nxt in seen or nxt == oid:
            continue
        seen.add(nxt)
        frontier.extend(parents.get(nxt, []))
    return seen


def direct_parent(obj: dict, by_id: dict[str, dict], parents: dict[str, list[str]]) -> str | None:
    """The one receptacle an object rests in directly.

    AI2-THOR lists every receptacle whose trigger box holds the object, so nested placements
    (a tomato on a plate on a counter) list several. The direct parent is the innermost: a
    listed receptacle that is itself inside another listed one. Ties (a pan across two burners)
    go to the receptacle nearest the object, then to the smaller objectId. The Floor is used
    only when nothing else is listed.
    """
    listed = [
        p for p in (obj.get("parentReceptacles") or []) if p in by_id and p != obj["objectId"]
    ]
    if not listed:
        return None
    non_floor = [p for p in listed if by_id[p]["objectType"] != "Floor"]
    candidates = non_floor or listed
    inner = [p for p in candidates if set(candidates) - {p} <= _ancestors(p, parents)]
    pool = inner or candidates
    pos = obj["position"]

    def key(pid: str) -> tuple[float, str]:
        c = by_id[pid]["axisAlignedBoundingBox"]["center"]
        return (math.hypot(c["x"] - pos["x"], c["z"] - pos["z"]), pid)

    return min(pool, key=key)


def acyclic_parents(
    objects: list[dict], by_id: dict[str, dict], parents: dict[str, list[str]]
) -> dict[str, str]:
    """Direct parents for all objects, forming a forest.

    Recorded trigger boxes sometimes overlap both ways (a Cup "on" a CounterTop that is "in"
    the Cup). Pickupable objects are assigned first; a parent that would close a cycle is
    dropped, so the furniture side of such a pair keeps no parent.
    """
    chosen: dict[str, str] = {}
    order = sorted(objects, key=lambda o: (not o["pickupable"], o["objectId"]))
    for o in order:
        parent = direct_parent(o, by_id, parents)
        node = parent
        while node is not None and node != o["objectId"]:
            node = chosen.get(node)
        if parent is not None and node is None:
            chosen[o["objectId"]] = parent
    return chosen


def build_scene(name: str, objects: list[dict], layout: np.ndarray, openable: dict) -> dict:
    """Compact, self-contained description of one scene."""
    by_id = {o["objectId"]: o for o in objects}
    parents = {o["objectId"]: list(o.get("parentReceptacles") or []) for o in objects}
    kept, removed = filter_reachable(layout, objects)
    chosen = acyclic_parents(objects, by_id, parents)
    stored = []
    for o in objects:
        rec = {k: v for k, v in o.items() if k not in PER_AGENT_KEYS}
        rec["parent"] = chosen.get(o["objectId"])
        stored.append(rec)
    return {
        "format": SCENE_FORMAT,
        "scene": name,
        "floor_y": floor_top(objects),
        "reachable": kept,
        "removed_reachable": removed,
        "openable_poses": openable,
        "objects": stored,
    }


def build_scene_files(metadata_json: Path, layouts_dir: Path, out_dir: Path) -> None:
    """Write ``FloorPlanN.json`` for all 120 iTHOR scenes, then ``manifest.json`` last."""
    recorded = json.loads(Path(metadata_json).read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    names = []
    types: dict[str, dict[str, int]] = {}
    removed_total = kept_total = 0
    for room_type, first in ROOM_TYPES:
        plans = recorded[room_type]
        if len(plans) != PLANS_PER_ROOM_TYPE:
            raise ValueError(
                f"{metadata_json}: key {room_type!r} holds {len(plans)} floor plans, "
                f"expected {PLANS_PER_ROOM_TYPE}"
            )
        for i, objects in enumerate(plans):
            name = f"FloorPlan{first + i}"
            layout = np.load(layouts_dir / f"{name}-layout.npy")
            openable = json.loads((layouts_dir / f"{name}-openable.json").read_text())
            scene = build_scene(name, objects, layout, openable)
            kept_total += len(scene["reachable"])
            removed_total += len(scene["removed_reachable"])
            write_atomically(out_dir / f"{name}.json", json.dumps(scene, separators=(",", ":")))
            names.append(name)
            types[name] = {}
            for o in objects:
                types[name][o["objectType"]] = types[name].get(o["objectType"], 0) + 1
    manifest = {
        "format": SCENE_FORMAT,
        "scenes": names,
        "reachable_points": kept_total,
        "removed_points": removed_total,
        "types": types,
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))
