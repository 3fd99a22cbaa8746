"""AI2-THOR actions on the embedded simulator: effects, failure semantics, metadata."""

from __future__ import annotations

import pytest
from conftest import face, first_of, obj, state_hash

from benchmark.sim import Controller
from benchmark.sim.scene import load_scene
from benchmark.sim.visibility import sees_box


@pytest.fixture
def kitchen() -> Controller:
    return Controller(scene="FloorPlan1", agentCount=1, seed=0)


def _do(c: Controller, action: str, **kwargs) -> dict:
    return c.step(action=action, **kwargs).metadata


def _free_cell_ahead(c: Controller, blocked: bool) -> None:
    """Teleport to a cell whose neighbour ahead is (blocked=False) or is not (True) reachable."""
    reach = c.scene.reachable_set
    for i, j in c.scene.reachable:
        for rot, (dx, dz) in ((0, (0, 1)), (90, (1, 0)), (180, (0, -1)), (270, (-1, 0))):
            if ((i + dx, j + dz) in reach) != blocked:
                _do(c, "Teleport", position={"x": i * 0.25, "z": j * 0.25}, rotation=rot, horizon=0)
                return
    raise AssertionError("no such cell")


def test_move_ahead_advances_one_grid_cell_along_the_heading(kitchen: Controller) -> None:
    _free_cell_ahead(kitchen, blocked=False)
    before = _do(kitchen, "Pass")["agent"]
    after = _do(kitchen, "MoveAhead")
    assert after["lastActionSuccess"]
    dx = after["agent"]["position"]["x"] - before["position"]["x"]
    dz = after["agent"]["position"]["z"] - before["position"]["z"]
    heading = before["rotation"]["y"]
    expected = {0: (0, 0.25), 90: (0.25, 0), 180: (0, -0.25), 270: (-0.25, 0)}[heading]
    assert (round(dx, 6), round(dz, 6)) == expected


def test_moving_into_a_wall_fails_and_leaves_the_agent_in_place(kitchen: Controller) -> None:
    _free_cell_ahead(kitchen, blocked=True)
    before = state_hash(kitchen)
    meta = _do(kitchen, "MoveAhead")
    assert not meta["lastActionSuccess"]
    assert "not a reachable position" in meta["errorMessage"]
    assert state_hash(kitchen) == before


def test_turning_and_looking_respect_ai2thor_limits(kitchen: Controller) -> None:
    start = _do(kitchen, "Pass")["agent"]["rotation"]["y"]
    for _ in range(4):
        _do(kitchen, "RotateRight")
    assert _do(kitchen, "Pass")["agent"]["rotation"]["y"] == start
    assert _do(kitchen, "LookDown", degrees=60)["agent"]["cameraHorizon"] == 60
    meta = _do(kitchen, "LookDown")
    assert not meta["lastActionSuccess"] and "cameraHorizon" in meta["errorMessage"]
    assert meta["agent"]["cameraHorizon"] == 60
    assert not _do(kitchen, "Stand")["lastActionSuccess"]
    assert _do(kitchen, "Crouch")["agent"]["isStanding"] is False


def test_objects_out_of_sight_cannot_be_picked_up(kitchen: Controller) -> None:
    apple = first_of(kitchen, "Apple")
    face(kitchen, apple)
    _do(kitchen, "RotateRight", degrees=180)
    before = state_hash(kitchen)
    meta = _do(kitchen, "PickupObject", objectId=apple)
    assert not meta["lastActionSuccess"] and "not visible" in meta["errorMessage"]
    assert state_hash(kitchen) == before


def test_apple_goes_into_the_fridge_only_once_it_is_open(kitchen: Controller) -> None:
    apple, fridge = first_of(kitchen, "Apple"), first_of(kitchen, "Fridge")
    face(kitchen, apple)
    meta = _do(kitchen, "PickupObject", objectId=apple)
    assert meta["lastActionSuccess"] and meta["inventoryObjects"] == [
        {"objectId": apple, "objectType": "Apple"}
    ]
    assert obj(kitchen.last_event, apple)["isPickedUp"]
    face(kitchen, fridge)
    meta = _do(kitchen, "PutObject", objectId=fridge)
    assert not meta["lastActionSuccess"] and "is closed" in meta["errorMessage"]
    assert _do(kitchen, "OpenObject", objectId=fridge)["lastActionSuccess"]
    meta = _do(kitchen, "PutObject", objectId=fridge)
    assert meta["lastActionSuccess"] and meta["inventoryObjects"] == []
    ev = kitchen.last_event
    assert obj(ev, apple)["parentReceptacles"][0] == fridge
    assert apple in obj(ev, fridge)["receptacleObjectIds"]
    assert obj(ev, apple)["temperature"] == "Cold"
    assert obj(ev, apple)["visible"]
    _do(kitchen, "CloseObject", objectId=fridge)
    assert not obj(kitchen.last_event, apple)["visible"]
    meta = _do(kitchen, "PickupObject", objectId=apple)
    assert not meta["lastActionSuccess"] and "closed receptacle" in meta["errorMessage"]


def test_put_rejects_an_incompatible_receptacle(kitchen: Controller) -> None:
    apple, toaster = first_of(kitchen, "Apple"), first_of(kitchen, "Toaster")
    face(kitchen, apple)
    _do(kitchen, "PickupObject", objectId=apple)
    face(kitchen, toaster)
    meta = _do(kitchen, "PutObject", objectId=toaster)
    assert not meta["lastActionSuccess"]
    assert "a Apple cannot be placed in a Toaster" in meta["errorMessage"]
    assert meta["inventoryObjects"][0]["objectId"] == apple


def test_the_hand_holds_one_object_and_drop_puts_it_on_the_floor(kitchen: Controller) -> None:
    apple, egg = first_of(kitchen, "Apple"), first_of(kitchen, "Egg")
    face(kitchen, apple)
    _do(kitchen, "PickupObject", objectId=apple)
    face(kitchen, egg)
    meta = _do(kitchen, "PickupObject", objectId=egg)
    assert not meta["lastActionSuccess"] and "already holding" in meta["errorMessage"]
    meta = _do(kitchen, "DropHandObject")
    assert meta["lastActionSuccess"] and meta["inventoryObjects"] == []
    assert obj(kitchen.last_event, apple)["parentReceptacles"] == [first_of(kitchen, "Floor")]
    assert not _do(kitchen, "DropHandObject")["lastActionSuccess"]


def test_slicing_needs_a_knife_and_creates_the_pieces(kitchen: Controller) -> None:
    bread, knife = first_of(kitchen, "Bread"), first_of(kitchen, "Knife")
    face(kitchen, bread)
    meta = _do(kitchen, "SliceObject", objectId=bread)
    assert not meta["lastActionSuccess"] and "Knife" in meta["errorMessage"]
    drawer = kitchen.world.specs[kitchen.world.objs[kitchen.world.index_of[knife]].parent].object_id
    face(kitchen, drawer)  # in FloorPlan1 the knife lies in a closed drawer
    assert _do(kitchen, "OpenObject", objectId=drawer)["lastActionSuccess"]
    face(kitchen, knife)
    assert _do(kitchen, "PickupObject", objectId=knife)["lastActionSuccess"]
    face(kitchen, bread)
    meta = _do(kitchen, "SliceObject", objectId=bread)
    assert meta["lastActionSuccess"], meta["errorMessage"]
    pieces = [o for o in meta["objects"] if o["objectType"] == "BreadSliced"]
    assert [p["objectId"] for p in pieces] == [f"{bread}|BreadSliced_{k}" for k in range(6)]
    assert all(p["pickupable"] and p["cookable"] for p in pieces)
    assert obj(kitchen.last_event, bread)["isSliced"]
    assert not obj(kitchen.last_event, bread)["visible"]
    assert not _do(kitchen, "SliceObject", objectId=bread)["lastActionSuccess"]


def test_a_toaster_toasts_a_bread_slice(kitchen: Controller) -> None:
    bread, knife, toaster = (first_of(kitchen, t) for t in ("Bread", "ButterKnife", "Toaster"))
    face(kitchen, knife)
    assert _do(kitchen, "PickupObject", objectId=knife)["lastActionSuccess"]
    face(kitchen, bread)
    assert _do(kitchen, "SliceObject", objectId=bread)["lastActionSuccess"]
    assert _do(kitchen, "DropHandObject")["lastActionSuccess"]
    piece = f"{bread}|BreadSliced_0"
    face(kitchen, piece)
    assert _do(kitchen, "PickupObject", objectId=piece)["lastActionSuccess"]
    face(kitchen, toaster)
    assert _do(kitchen, "PutObject", objectId=toaster)["lastActionSuccess"]
    assert not obj(kitchen.last_event, piece)["isCooked"]
    assert _do(kitchen, "ToggleObjectOn", objectId=toaster)["lastActionSuccess"]
    assert obj(kitchen.last_event, piece)["isCooked"]
    assert obj(kitchen.last_event, piece)["temperature"] == "Hot"
    assert not _do(kitchen, "ToggleObjectOn", objectId=toaster)["lastActionSuccess"]


def test_a_stove_knob_heats_its_burner_and_cooks_what_the_pan_holds() -> None:
    c = Controller(scene="FloorPlan9", agentCount=1, seed=0)
    pan = "Pan|+00.64|+00.96|+01.09"
    burner = c.world.specs[c.world.objs[c.world.index_of[pan]].parent]
    knob = next(s for s in c.world.specs if burner.index in s.controlled)
    other = next(s for s in c.world.specs if s.controlled and burner.index not in s.controlled)
    potato = first_of(c, "Potato")
    face(c, potato)
    assert _do(c, "PickupObject", objectId=potato)["lastActionSuccess"]
    face(c, pan)
    assert _do(c, "PutObject", objectId=pan)["lastActionSuccess"]
    face(c, other.object_id)
    _do(c, "ToggleObjectOn", objectId=other.object_id)
    assert not obj(c.last_event, potato)["isCooked"], "the other knob's burner must stay cold"
    face(c, knob.object_id)
    assert _do(c, "ToggleObjectOn", objectId=knob.object_id)["lastActionSuccess"]
    assert obj(c.last_event, potato)["isCooked"]


def test_the_coffee_machine_fills_a_mug_and_the_faucet_cleans_one() -> None:
    c = Controller(scene="FloorPlan1", agentCount=1, seed=0)
    mug, machine = first_of(c, "Mug"), first_of(c, "CoffeeMachine")
    basin, faucet = first_of(c, "SinkBasin"), first_of(c, "Faucet")
    face(c, mug)
    _do(c, "PickupObject", objectId=mug)
    assert _do(c, "DirtyObject", objectId=mug)["lastActionSuccess"]
    face(c, basin)
    assert _do(c, "PutObject", objectId=basin)["lastActionSuccess"]
    face(c, faucet)
    assert _do(c, "ToggleObjectOn", objectId=faucet)["lastActionSuccess"]
    meta = obj(c.last_event, mug)
    assert not meta["isDirty"] and meta["isFilledWithLiquid"] and meta["fillLiquid"] == "water"
    face(c, mug)
    _do(c, "PickupObject", objectId=mug)
    assert _do(c, "EmptyLiquidFromObject", objectId=mug)["lastActionSuccess"]
    face(c, machine)
    assert _do(c, "PutObject", objectId=machine)["lastActionSuccess"]
    _do(c, "ToggleObjectOn", objectId=machine)
    meta = obj(c.last_event, mug)
    assert meta["isFilledWithLiquid"] and meta["fillLiquid"] == "coffee"


def test_breaking_an_egg_leaves_a_cookable_cracked_egg(kitchen: Controller) -> None:
    egg, fridge = first_of(kitchen, "Egg"), first_of(kitchen, "Fridge")
    face(kitchen, egg)
    assert "closed receptacle" in _do(kitchen, "BreakObject", objectId=egg)["errorMessage"]
    face(kitchen, fridge)  # in FloorPlan1 the egg is in the fridge
    _do(kitchen, "OpenObject", objectId=fridge)
    face(kitchen, egg)
    meta = _do(kitchen, "BreakObject", objectId=egg)
    assert meta["lastActionSuccess"]
    cracked = obj(kitchen.last_event, f"{egg}|EggCracked_0")
    assert cracked["cookable"] and cracked["pickupable"]
    assert obj(kitchen.last_event, egg)["isBroken"]
    face(kitchen, cracked["objectId"])
    assert _do(kitchen, "CookObject", objectId=cracked["objectId"])["lastActionSuccess"]
    assert obj(kitchen.last_event, cracked["objectId"])["isCooked"]


def test_liquids_and_using_up(kitchen: Controller) -> None:
    mug = first_of(kitchen, "Mug")
    face(kitchen, mug)
    meta = _do(kitchen, "FillObjectWithLiquid", objectId=mug, fillLiquid="wine")
    assert meta["lastActionSuccess"] and obj(kitchen.last_event, mug)["fillLiquid"] == "wine"
    assert (
        "already filled"
        in _do(kitchen, "FillObjectWithLiquid", objectId=mug, fillLiquid="water")["errorMessage"]
    )
    with pytest.raises(ValueError, match="coffee"):
        kitchen.step(action="FillObjectWithLiquid", objectId=mug, fillLiquid="juice")
    assert _do(kitchen, "EmptyLiquidFromObject", objectId=mug)["lastActionSuccess"]
    assert not obj(kitchen.last_event, mug)["isFilledWithLiquid"]
    meta = _do(kitchen, "UseUpObject", objectId=mug)
    assert not meta["lastActionSuccess"] and "cannot be used up" in meta["errorMessage"]


def test_open_and_close_fail_when_already_in_that_state(kitchen: Controller) -> None:
    fridge = first_of(kitchen, "Fridge")
    face(kitchen, fridge)
    assert "already closed" in _do(kitchen, "CloseObject", objectId=fridge)["errorMessage"]
    assert _do(kitchen, "OpenObject", objectId=fridge, openness=0.5)["lastActionSuccess"]
    assert obj(kitchen.last_event, fridge)["openness"] == 0.5
    assert (
        "already open" in _do(kitchen, "OpenObject", objectId=fridge, openness=0.5)["errorMessage"]
    )
    assert not _do(kitchen, "OpenObject", objectId=first_of(kitchen, "Apple"))["lastActionSuccess"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"action": "Fly"}, "valid actions are"),
        ({"action": "MoveAhead", "speed": 2}, "valid arguments are"),
        ({"action": "PickupObject"}, "missing required argument"),
        ({"action": "PickupObject", "objectId": 7}, "must be str"),
        ({"action": "RotateLeft", "degrees": 0}, "Cannot rotate by 0 degrees"),
        ({"action": "MoveAhead", "moveMagnitude": 0.3}, "multiple of gridSize"),
        ({"action": "OpenObject", "objectId": "x", "openness": 2.0}, "openness"),
        ({"action": "TeleportFull", "position": {"x": 0, "z": 0}}, "missing required argument"),
        ({"action": "MoveAhead", "agentId": 3}, "agentId"),
        ({"action": "MoveAhead", "forceAction": 1}, "must be bool"),
    ],
)
def test_malformed_calls_raise_value_error_naming_the_choices(call: dict, message: str) -> None:
    c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
    before = state_hash(c)
    with pytest.raises(ValueError, match=message):
        c.step(**call)
    assert state_hash(c) == before


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"scene": "FloorPlan99"}, "valid scenes are"),
        ({"agentCount": 9}, "agentCount"),
        ({"agentCount": 0}, "agentCount"),
        ({"gridSize": 0.5}, "gridSize"),
        ({"fieldOfView": 200}, "fieldOfView"),
        ({"renderDepthImages": True}, "valid arguments are"),
    ],
)
def test_bad_controller_arguments_raise_value_error(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Controller(**params)


def test_impossible_actions_report_failure_and_change_nothing(kitchen: Controller) -> None:
    before = state_hash(kitchen)
    for call in (
        {"action": "PickupObject", "objectId": "Nothing|+00.00|+00.00|+00.00"},
        {"action": "PutObject", "objectId": first_of(kitchen, "Fridge")},
        {"action": "ToggleObjectOn", "objectId": first_of(kitchen, "Apple"), "forceAction": True},
        {"action": "SliceObject", "objectId": first_of(kitchen, "Bread"), "forceAction": True},
        {"action": "CleanObject", "objectId": first_of(kitchen, "Apple"), "forceAction": True},
        {"action": "Teleport", "position": {"x": 100.0, "z": 100.0}},
        {"action": "Teleport", "position": {"x": 0.1, "z": 0.0}},
    ):
        meta = kitchen.step(**call).metadata
        assert not meta["lastActionSuccess"] and meta["errorMessage"], call
    assert state_hash(kitchen) == before


def test_metadata_keys_match_ai2thor(kitchen: Controller, recorded_metadata: dict) -> None:
    meta = kitchen.step(action="Pass").metadata
    for key in (
        "objects",
        "agent",
        "inventoryObjects",
        "lastAction",
        "lastActionSuccess",
        "errorMessage",
        "actionReturn",
        "sceneName",
        "agentId",
    ):
        assert key in meta
    assert set(meta["agent"]) >= {"position", "rotation", "cameraHorizon", "isStanding"}
    recorded_keys = set(recorded_metadata["kitchens"][0][0])
    for o in meta["objects"]:
        assert set(o) == recorded_keys
    assert meta["sceneName"] == "FloorPlan1"
    assert isinstance(meta["objects"][0]["distance"], float)


def test_get_reachable_positions_returns_the_grid(kitchen: Controller) -> None:
    meta = _do(kitchen, "GetReachablePositions")
    positions = meta["actionReturn"]
    assert len(positions) == len(load_scene("FloorPlan1").reachable)
    assert all(set(p) == {"x", "y", "z"} for p in positions)


def test_an_old_event_keeps_the_state_it_was_created_with(kitchen: Controller) -> None:
    apple = first_of(kitchen, "Apple")
    face(kitchen, apple)
    old = kitchen.step(action="Pass")
    kitchen.step(action="PickupObject", objectId=apple)
    assert obj(old, apple)["isPickedUp"] is False
    assert obj(kitchen.last_event, apple)["isPickedUp"] is True


def test_visibility_needs_distance_field_of_view_and_line_of_sight(kitchen: Controller) -> None:
    apple = first_of(kitchen, "Apple")
    face(kitchen, apple)
    assert obj(kitchen.step(action="Pass"), apple)["visible"]
    agent = kitchen.step(action="Pass").metadata["agent"]
    near_sighted = Controller(scene="FloorPlan1", visibilityDistance=0.1, seed=0)
    near_sighted.step(
        action="Teleport",
        position=agent["position"],
        rotation=agent["rotation"],
        horizon=agent["cameraHorizon"],
    )
    assert not obj(near_sighted.step(action="Pass"), apple)["visible"], "too far"
    kitchen.step(action="RotateLeft", degrees=180)
    assert not obj(kitchen.step(action="Pass"), apple)["visible"], "behind the agent"


class _NoWalls:
    """A stand-in scene for sees_box whose every line of sight is clear."""

    @staticmethod
    def line_of_sight(*_args: float) -> bool:
        return True


def test_walls_block_the_line_of_sight() -> None:
    """With a long visibility range, objects in range and in view can still hide behind walls."""
    c = Controller(scene="FloorPlan1", visibilityDistance=8.0, seed=0)
    world, scene = c.world, c.scene
    blocked = seen = 0
    for i, j in scene.reachable[::3]:
        for rotation in (0, 90, 180, 270):
            c.step(action="Teleport", position={"x": i * 0.25, "z": j * 0.25}, rotation=rotation)
            agent = world.agents[0]
            for k in range(len(world.objs)):
                if world.enclosed(k):
                    continue
                in_view = sees_box(
                    _NoWalls(),
                    i * 0.25,
                    j * 0.25,
                    rotation,
                    agent.horizon,
                    world.camera_y(agent),
                    world.box(k),
                    8.0,
                    90,
                )
                if not in_view:
                    assert not world.visible(0, k)
                    continue
                x0, x1, _, _, z0, z1 = world.box(k)
                clear = scene.line_of_sight(
                    i * 0.25, j * 0.25, min(max(i * 0.25, x0), x1), min(max(j * 0.25, z0), z1)
                )
                assert world.visible(0, k) == clear
                seen += clear
                blocked += not clear
    assert seen > 100 and blocked > 10, (seen, blocked)


def test_every_declared_argument_reaches_its_handler() -> None:
    import inspect

    from benchmark.sim.actions import ACTIONS

    for name, spec in ACTIONS.items():
        params = inspect.signature(spec.handler).parameters
        for arg in {**spec.required, **spec.optional}:
            assert arg in params, f"{name}: handler {spec.handler.__name__} lacks {arg}"


def test_moved_objects_carry_their_bounding_boxes(kitchen: Controller) -> None:
    apple, pot = first_of(kitchen, "Apple"), first_of(kitchen, "Pot")
    before = obj(kitchen.step(action="Pass"), apple)
    face(kitchen, apple)
    kitchen.step(action="PickupObject", objectId=apple)
    face(kitchen, pot)
    assert kitchen.step(action="PutObject", objectId=pot).metadata["lastActionSuccess"]
    after = obj(kitchen.last_event, apple)
    assert after["parentReceptacles"][0] == pot
    shift = [after["position"][k] - before["position"][k] for k in "xyz"]
    assert max(abs(s) for s in shift) > 0.05
    for k, axis in enumerate("xyz"):
        centre = after["axisAlignedBoundingBox"]["center"][axis]
        assert centre - before["axisAlignedBoundingBox"]["center"][axis] == pytest.approx(shift[k])
        assert after["axisAlignedBoundingBox"]["size"][axis] == pytest.approx(
            before["axisAlignedBoundingBox"]["size"][axis]
        )
        moved = [p[k] for p in after["objectOrientedBoundingBox"]["cornerPoints"]]
        recorded = [p[k] for p in before["objectOrientedBoundingBox"]["cornerPoints"]]
        assert sum(moved) / 8 - sum(recorded) / 8 == pytest.approx(shift[k])


def test_line_of_sight_does_not_depend_on_the_order_of_queries() -> None:
    scene = load_scene("FloorPlan201")
    rng = __import__("numpy").random.default_rng(0)
    cells = [scene.reachable[k] for k in rng.choice(len(scene.reachable), 40)]
    targets = [(float(x), float(z)) for x, z in rng.uniform(-3, 3, size=(60, 2))]
    queries = [(i * 0.25, j * 0.25, tx, tz) for i, j in cells for tx, tz in targets]
    scene._los.clear()
    forward = [scene.line_of_sight(*q) for q in queries]
    scene._los.clear()
    backward = [scene.line_of_sight(*q) for q in reversed(queries)][::-1]
    assert forward == backward
