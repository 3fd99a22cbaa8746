"""AI2-THOR's PlaceObjectAtPoint and SetObjectPoses on the embedded simulator, with points and
object ids from MAP-THOR's pre-initialisations of the recorded iTHOR scenes."""

from __future__ import annotations

import pytest
from conftest import check_containment, first_of, obj, state_hash

from benchmark.sim import Controller
from benchmark.sim.catalog import ithor_scenes
from benchmark.sim.placing import find_support


def _do(c: Controller, action: str, **kwargs) -> dict:
    return c.step(action=action, **kwargs).metadata


def _xyz(p: tuple[float, float, float]) -> dict[str, float]:
    return dict(zip("xyz", p, strict=True))


def _top(meta_object: dict) -> float:
    box = meta_object["axisAlignedBoundingBox"]
    return box["center"]["y"] + box["size"]["y"] / 2


def _bottom(meta_object: dict) -> float:
    box = meta_object["axisAlignedBoundingBox"]
    return box["center"]["y"] - box["size"]["y"] / 2


# ----------------------------------------------------------------------------- PlaceObjectAtPoint
# MAP-THOR's "clear the table" pre-initialisation of FloorPlan4: objectId, point, and where the
# object should come to rest (the receptacle type under the point).
FLOORPLAN4_CLEAR_TABLE = [
    (
        "Bowl|-00.50|+01.04|+02.22",
        (-2.1063849925994873, 1.1733312606811523, 0.7011251449584961),
        "CounterTop",
    ),
    (
        "Lettuce|-03.31|+00.97|+03.04",
        (-0.8295101523399353, 1.1071478128433228, 3.0430819988250732),
        "DiningTable",
    ),
    (
        "Bread|-00.18|+01.12|+01.89",
        (-0.1839999258518219, 0.08092722296714783, 1.6588339805603027),
        "Floor",
    ),
    (
        "Fork|-00.46|+01.04|+01.78",
        (-0.9567239284515381, 1.0398824214935303, 1.89305579662323),
        "DiningTable",
    ),
]


def test_place_object_at_point_rests_objects_on_the_surface_below_mapthor_points() -> None:
    c = Controller(scene="FloorPlan4")
    for oid, point, parent_type in FLOORPLAN4_CLEAR_TABLE:
        ev = c.step(action="PlaceObjectAtPoint", objectId=oid, position=_xyz(point))
        meta = ev.metadata
        assert meta["lastActionSuccess"], meta["errorMessage"]
        placed = obj(ev, oid)
        parent = obj(ev, placed["parentReceptacles"][0])
        assert parent["objectType"] == parent_type
        assert oid in parent["receptacleObjectIds"]
        assert placed["position"]["x"] == point[0] and placed["position"]["z"] == point[2]
        assert _bottom(placed) == pytest.approx(_top(parent), abs=1e-6)
        assert placed["position"]["y"] <= point[1] + 0.02
        assert meta["actionReturn"] == placed["position"]
    check_containment(c.last_event.metadata)


# Calls that leave an object where iTHOR put it (MAP-THOR pre-initialisations re-place every
# object they mention): floor plan, objectId, point. The recorded parent must stay.
MAPTHOR_UNMOVED = [
    (
        1,
        "Bread|-00.52|+01.17|-00.03",
        (-0.5223836302757263, 1.1704490184783936, -0.028279857710003853),
    ),
    (
        3,
        "Lettuce|-01.89|+01.40|-01.07",
        (-1.892227053642273, 1.399842381477356, -1.0701444149017334),
    ),
    (
        5,
        "Tomato|-01.15|+00.96|-01.66",
        (-1.1477510929107666, 0.9576261043548584, -1.6583662033081055),
    ),
    (4, "Mug|-00.38|+01.09|+03.19", (-0.37789222598075867, 1.094783902168274, 3.194014549255371)),
    (
        202,
        "Laptop|-03.22|+00.61|+00.58",
        (-3.2156782150268555, 0.614728569984436, 0.582680344581604),
    ),
    (
        203,
        "RemoteControl|-01.27|+00.45|+03.29",
        (-1.2715975046157837, 0.44544124603271484, 3.294555187225342),
    ),
    (
        216,
        "Vase|-00.03|+00.11|+01.19",
        (-0.025592807680368423, 0.1110864132642746, 1.1932799816131592),
    ),
    (
        201,
        "RemoteControl|-02.58|+00.74|-00.15",
        (-2.5830140113830566, 0.7350274920463562, -0.14601318538188934),
    ),
]


@pytest.mark.parametrize(("plan", "oid", "point"), MAPTHOR_UNMOVED)
def test_place_object_at_its_own_spot_keeps_its_recorded_receptacle(
    plan: int, oid: str, point: tuple
) -> None:
    c = Controller(scene=f"FloorPlan{plan}")
    recorded = obj(c.last_event, oid)["parentReceptacles"]
    ev = c.step(action="PlaceObjectAtPoint", objectId=oid, position=_xyz(point))
    assert ev.metadata["lastActionSuccess"]
    assert obj(ev, oid)["parentReceptacles"] == recorded


def test_objects_put_back_at_their_recorded_positions_mostly_keep_their_receptacles() -> None:
    """The surface rule against the recorded scenes: every fourth floor plan of each room type."""
    kept = total = 0
    for scene in ithor_scenes()[::4]:
        c = Controller(scene=scene)
        world = c.world
        for spec in world.specs:
            parent = world.objs[spec.index].parent
            if not spec.pickupable or parent < 0:
                continue
            support = find_support(world, spec.index, *world.position(spec.index))
            total += 1
            kept += support is not None and support.parent == parent
    assert total > 400 and kept / total >= 0.9, (kept, total)


def test_place_object_at_point_failures_change_nothing() -> None:
    c = Controller(scene="FloorPlan30")
    mug = "Mug|+01.10|+00.90|+00.11"
    before = state_hash(c)
    outside = _do(c, "PlaceObjectAtPoint", objectId=mug, position={"x": 40.0, "y": 1.0, "z": 0.0})
    assert not outside["lastActionSuccess"]
    assert (
        "Position coordinate (40.0, 1.0, 0.0) is not within scene bounds" in outside["errorMessage"]
    )
    # Under the counter that overhangs the floor's edge: no surface below the point.
    hanging = _do(c, "PlaceObjectAtPoint", objectId=mug, position={"x": -1.144, "y": 0.5, "z": 0.0})
    assert not hanging["lastActionSuccess"] and "no surface below" in hanging["errorMessage"]
    unknown = _do(c, "PlaceObjectAtPoint", objectId="Mug|0", position={"x": 0, "y": 1, "z": 0})
    assert unknown["errorMessage"] == "Cannot find object with id Mug|0."
    furniture = _do(
        c, "PlaceObjectAtPoint", objectId=first_of(c, "Fridge"), position={"x": 0, "y": 1, "z": 0}
    )
    assert not furniture["lastActionSuccess"] and "not pickupable" in furniture["errorMessage"]
    assert state_hash(c) == before
    # The same mug above the overhanging counter lands on it.
    ev = c.step(
        action="PlaceObjectAtPoint", objectId=mug, position={"x": -1.144, "y": 0.95, "z": 0.0}
    )
    assert obj(ev, mug)["parentReceptacles"] == ["CounterTop|-01.01|+00.94|-00.04"]
    with pytest.raises(ValueError, match="position must be a dict"):
        c.step(action="PlaceObjectAtPoint", objectId=mug, position={"x": 0, "z": 0})


def test_place_object_at_point_takes_a_held_object_and_carries_contents() -> None:
    c = Controller(scene="FloorPlan1")
    apple, bowl = first_of(c, "Apple"), "Bowl|+00.27|+01.10|-00.75"
    _do(c, "PickupObject", objectId=apple, forceAction=True)
    meta = _do(c, "PutObject", objectId=bowl, forceAction=True)
    assert meta["lastActionSuccess"], meta["errorMessage"]
    _do(c, "PickupObject", objectId=bowl, forceAction=True)
    assert _do(c, "Pass")["inventoryObjects"][0]["objectId"] == bowl
    apple_before = obj(c.last_event, apple)["position"]
    bowl_before = obj(c.last_event, bowl)["position"]
    # MAP-THOR FloorPlan1 spot on the counter by the stove (the egg's point).
    ev = c.step(
        action="PlaceObjectAtPoint",
        objectId=bowl,
        position={"x": -0.5013247728347778, "y": 1.2045999765396118, "z": -1.0120956897735596},
        forceKinematic=True,
    )
    meta = ev.metadata
    assert (
        meta["lastActionSuccess"]
        and meta["inventoryObjects"] == []
        and meta["actionReturn"] is None
    )
    assert obj(ev, bowl)["parentReceptacles"][0].startswith("CounterTop")
    assert obj(ev, apple)["parentReceptacles"][0] == bowl
    for k in "xyz":
        shift = obj(ev, bowl)["position"][k] - bowl_before[k]
        assert obj(ev, apple)["position"][k] - apple_before[k] == pytest.approx(shift)


def test_an_object_placed_inside_a_closed_fridge_is_enclosed_and_force_still_reaches_it() -> None:
    c = Controller(scene="FloorPlan1")
    fridge, tomato = first_of(c, "Fridge"), first_of(c, "Tomato")
    box = obj(c.last_event, fridge)["axisAlignedBoundingBox"]["center"]
    ev = c.step(action="PlaceObjectAtPoint", objectId=tomato, position=dict(box))
    assert obj(ev, tomato)["parentReceptacles"][0] == fridge and not obj(ev, fridge)["isOpen"]
    assert not obj(ev, tomato)["visible"]
    refused = _do(c, "PickupObject", objectId=tomato)
    assert not refused["lastActionSuccess"] and "closed receptacle" in refused["errorMessage"]
    assert _do(c, "PickupObject", objectId=tomato, forceAction=True)["lastActionSuccess"]


# ----------------------------------------------------------------------------- SetObjectPoses
def test_every_object_in_the_metadata_has_a_unique_name() -> None:
    for scene in ("FloorPlan1", "FloorPlan212", "FloorPlan305", "FloorPlan420"):
        c = Controller(scene=scene)
        bread = next((s.object_id for s in c.world.specs if s.sliceable), None)
        if bread is not None:
            knife = next(
                s.object_id for s in c.world.specs if s.object_type in ("Knife", "ButterKnife")
            )
            _do(c, "PickupObject", objectId=knife, forceAction=True)
            assert _do(c, "SliceObject", objectId=bread, forceAction=True)["lastActionSuccess"]
        names = [o["name"] for o in _do(c, "Pass")["objects"]]
        assert all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names)


def _poses(meta: dict, skip: str = "") -> list[dict]:
    return [
        {"objectName": o["name"], "position": o["position"], "rotation": o["rotation"]}
        for o in meta["objects"]
        if (o["pickupable"] or o["moveable"]) and o["objectId"] != skip
    ]


def test_set_object_poses_moves_objects_by_name_and_removes_the_unlisted() -> None:
    c = Controller(scene="FloorPlan1")
    meta = _do(c, "Pass")
    apple, mug = first_of(c, "Apple"), first_of(c, "Mug")
    poses = _poses(meta, skip=apple)
    target = {"x": -0.5013247728347778, "y": 1.2045999765396118, "z": -1.0120956897735596}
    for pose in poses:
        if pose["objectName"] == obj(c.last_event, mug)["name"]:
            pose["position"] = target
    ev = c.step(action="SetObjectPoses", objectPoses=poses)
    after = ev.metadata
    assert after["lastActionSuccess"], after["errorMessage"]
    assert apple not in {o["objectId"] for o in after["objects"]}
    assert len(after["objects"]) == len(meta["objects"]) - 1
    assert obj(ev, mug)["position"] == target
    assert obj(ev, mug)["parentReceptacles"][0].startswith("CounterTop")
    check_containment(after)
    gone = _do(c, "PickupObject", objectId=apple, forceAction=True)
    assert not gone["lastActionSuccess"] and apple in gone["errorMessage"]


def test_set_object_poses_reports_bad_names_and_still_applies_the_rest() -> None:
    c = Controller(scene="FloorPlan1")
    meta = _do(c, "Pass")
    poses = _poses(meta)
    mug_name = obj(c.last_event, first_of(c, "Mug"))["name"]
    moved = next(p for p in poses if p["objectName"] == mug_name)
    moved["position"] = {"x": -0.5, "y": 1.2, "z": -1.0}
    ev = c.step(
        action="SetObjectPoses",
        objectPoses=[
            *poses,
            {"objectName": "Mug_nonexistent", "position": {"x": 0, "y": 1, "z": 0}},
        ],
    )
    assert not ev.metadata["lastActionSuccess"]
    assert ev.metadata["errorMessage"] == (
        "No Pickupable or Moveable object of name Mug_nonexistent found in scene."
    )
    assert obj(ev, first_of(c, "Mug"))["position"] == {"x": -0.5, "y": 1.2, "z": -1.0}
    assert len(ev.metadata["objects"]) == len(meta["objects"])


def test_set_object_poses_refuses_copies_moving_furniture_and_an_empty_list() -> None:
    c = Controller(scene="FloorPlan1")
    meta = _do(c, "Pass")
    poses = _poses(meta)
    dup = _do(c, "SetObjectPoses", objectPoses=[*poses, poses[0]])
    assert not dup["lastActionSuccess"] and "cannot create" in dup["errorMessage"]
    furniture = next(o for o in meta["objects"] if o["moveable"] and not o["pickupable"])
    shifted = [
        {**p, "position": {"x": 0.0, "y": 0.0, "z": 0.0}}
        if p["objectName"] == furniture["name"]
        else p
        for p in poses
    ]
    moved = _do(c, "SetObjectPoses", objectPoses=shifted)
    assert not moved["lastActionSuccess"] and "furniture" in moved["errorMessage"]
    assert obj(c.last_event, furniture["objectId"])["position"] == furniture["position"]
    before = state_hash(c)
    empty = _do(c, "SetObjectPoses", objectPoses=[])
    assert empty["errorMessage"].startswith("objectPoses was not initialized correctly.")
    assert state_hash(c) == before
    with pytest.raises(ValueError, match="objectPoses\\[0\\]"):
        c.step(action="SetObjectPoses", objectPoses=[{"name": "Apple_1"}])
    # A pose outside the scene fails and leaves that object where it was, still in the scene.
    book = next(o for o in _do(c, "Pass")["objects"] if o["objectType"] == "Book")
    far = [
        {**p, "position": {"x": 100.0, "y": -50.0, "z": 100.0}}
        if p["objectName"] == book["name"]
        else p
        for p in _poses(_do(c, "Pass"))
    ]
    out = _do(c, "SetObjectPoses", objectPoses=far)
    assert not out["lastActionSuccess"] and "not within scene bounds" in out["errorMessage"]
    assert obj(c.last_event, book["objectId"])["position"] == book["position"]
    assert obj(c.last_event, book["objectId"])["parentReceptacles"]
    with pytest.raises(ValueError, match="finite"):
        c.step(
            action="SetObjectPoses",
            objectPoses=[{**far[0], "rotation": {"x": 0, "y": float("nan"), "z": 0}}],
        )
