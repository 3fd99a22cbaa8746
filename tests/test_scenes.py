"""The 120 iTHOR scenes load from the real recorded data, and the benchmark's scene facts
agree with it."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pytest

from benchmark.sim import Controller, ithor_scenes, load_scene, normalize_scene, room_type_of
from benchmark.sim.catalog import ROOM_TYPES
from benchmark.sim.facts import object_facts, scene_splits


def test_there_are_120_ithor_scenes_in_ai2thor_order() -> None:
    names = ithor_scenes()
    assert len(names) == 120 == len(set(names))
    assert names[:2] == ["FloorPlan1", "FloorPlan2"] and names[-1] == "FloorPlan430"
    assert len(ithor_scenes("bathrooms")) == 30
    assert room_type_of("FloorPlan215_physics") == "living_rooms"


def test_both_ai2thor_spellings_are_accepted_and_others_rejected() -> None:
    assert normalize_scene("FloorPlan28_physics") == "FloorPlan28"
    assert normalize_scene("FloorPlan428") == "FloorPlan428"
    for bad in ("FloorPlan31", "FloorPlan0", "Kitchen1", "FloorPlan_Train1_1", 3):
        with pytest.raises(ValueError, match="valid scenes are"):
            normalize_scene(bad)  # type: ignore[arg-type]


def test_every_scene_loads_with_objects_grid_and_poses(scene_dir: Path) -> None:
    """Load times are measured by ``python -m benchmark.bench sim`` (``scene_load_ms``)."""
    for name in ithor_scenes():
        scene = load_scene(name)
        assert scene.name == name
        assert len(scene.specs) >= 20
        assert len(scene.reachable) >= 20
        assert scene.openable_poses
        assert any(s.object_type == "Floor" for s in scene.specs)
        assert all(o.active for o in scene.initial)


def _ids_position(object_id: str) -> tuple[str, np.ndarray]:
    kind, x, y, z = object_id.split("|")[:4]
    return kind, np.array([float(x), float(y), float(z)])


def test_recorded_list_index_i_is_floorplan_base_plus_i(
    recorded_metadata: dict, layouts_dir: Path
) -> None:
    """Match each ALFWorld floor plan's openable objects (type + position parsed from their ids)
    against every recorded plan of the same room type; the closest must be index i."""
    for room_type, first in ROOM_TYPES:
        plans = recorded_metadata[room_type]
        by_plan = []
        for objects in plans:
            table = collections.defaultdict(list)
            for o in objects:
                p = o["position"]
                table[o["objectType"]].append([p["x"], p["y"], p["z"]])
            by_plan.append({k: np.array(v) for k, v in table.items()})
        for i in range(30):
            poses = json.loads((layouts_dir / f"FloorPlan{first + i}-openable.json").read_text())
            scores = []
            for table in by_plan:
                dists = []
                for object_id in poses:
                    kind, pos = _ids_position(object_id)
                    near = table.get(kind)
                    dists.append(
                        5.0
                        if near is None
                        else min(5.0, float(np.min(np.linalg.norm(near - pos, axis=1))))
                    )
                scores.append(float(np.mean(dists)))
            assert int(np.argmin(scores)) == i, (room_type, i, scores[i], min(scores))


def test_scene_objects_are_the_recorded_objects(recorded_metadata: dict) -> None:
    for room_type, first in ROOM_TYPES:
        for i in (0, 17, 29):
            scene = load_scene(f"FloorPlan{first + i}")
            recorded = recorded_metadata[room_type][i]
            assert [s.object_id for s in scene.specs] == [o["objectId"] for o in recorded]
            for spec, rec in zip(scene.specs, recorded, strict=True):
                assert spec.openable == rec["openable"] and spec.pickupable == rec["pickupable"]


def test_properties_are_per_instance_not_per_type() -> None:
    """Some Cabinets are breakable, most are not: properties come from each recorded instance."""
    flags = collections.defaultdict(set)
    for name in ithor_scenes():
        for spec in load_scene(name).specs:
            flags[spec.object_type].add((spec.breakable, spec.receptacle))
    assert len(flags["Cabinet"]) == 2
    assert len(flags["Sink"]) == 2


def test_the_compatibility_table_accepts_every_recorded_placement(recorded_metadata: dict) -> None:
    facts = object_facts()
    missing = set()
    pairs = 0
    for room_type, _ in ROOM_TYPES:
        for objects in recorded_metadata[room_type]:
            types = {o["objectId"]: o["objectType"] for o in objects}
            for o in objects:
                for parent in o["parentReceptacles"] or []:
                    pairs += 1
                    if not facts.accepts(types[parent], o["objectType"]):
                        missing.add((o["objectType"], types[parent]))
    assert pairs > 3000
    assert not missing, sorted(missing)


def test_the_compatibility_table_rejects_implausible_placements() -> None:
    facts = object_facts()
    assert facts.accepts("Fridge", "Apple")
    assert not facts.accepts("Toaster", "Apple")
    assert not facts.accepts("Mug", "Laptop")


def test_splits_partition_the_scenes_by_room_type() -> None:
    splits = scene_splits()
    assert set(splits) == {"train", "val", "test"}
    every = [s for names in splits.values() for s in names]
    assert sorted(every) == sorted(ithor_scenes())
    assert len(splits["train"]) == 80 and len(splits["val"]) == 20 and len(splits["test"]) == 20
    assert "FloorPlan26" in splits["test"] and "FloorPlan421" in splits["val"]


def test_nested_placements_rest_directly_in_the_innermost_receptacle() -> None:
    """AI2-THOR lists every receptacle around an object; the simulator keeps the innermost."""
    cases = {
        "FloorPlan5": ("Tomato|-01.15|+00.96|-01.66", "Plate|-01.12|+00.90|-01.65"),
        "FloorPlan4": ("Mug|-00.38|+01.09|+03.19", "CoffeeMachine|-00.15|+01.04|+03.19"),
        # across two burners: the nearer one
        "FloorPlan9": ("Pan|+00.64|+00.96|+01.09", "StoveBurner|+00.68|+00.92|+01.08"),
    }
    for name, (child, parent) in cases.items():
        scene = load_scene(name)
        assert scene.specs[scene.initial[scene.index_of[child]].parent].object_id == parent


def test_containment_is_acyclic_in_every_scene() -> None:
    for name in ithor_scenes():
        world = Controller(scene=name).world
        for k in range(len(world.objs)):
            chain = world.ancestors(k)
            assert len(chain) == len(set(chain)) and k not in chain, (name, k)
