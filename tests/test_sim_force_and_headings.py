"""AI2-THOR's forceAction and exact headings on the embedded simulator: what forceAction skips
and never skips, RotateLeft/RotateRight by any amount, teleporting to any yaw, moving along an
off-axis heading on the grid, and visibility at any heading."""

from __future__ import annotations

import math

import pytest
from conftest import face, first_of, obj, state_hash

from benchmark.sim import Controller
from benchmark.sim.visibility import sees_box


def _do(c: Controller, action: str, **kwargs) -> dict:
    return c.step(action=action, **kwargs).metadata


# ----------------------------------------------------------------------------- forceAction
def _far_from(c: Controller, object_id: str) -> None:
    """Teleport agent 0 to the reachable cell farthest from the object."""
    x, _, z = c.world.position(c.world.index_of[object_id])
    i, j = max(c.scene.reachable, key=lambda cell: math.dist((cell[0] / 4, cell[1] / 4), (x, z)))
    assert _do(c, "Teleport", position={"x": i / 4, "z": j / 4})["lastActionSuccess"]
    assert not obj(c.last_event, object_id)["visible"]


def test_force_action_skips_sight_checks_for_object_actions() -> None:
    c = Controller(scene="FloorPlan1")
    bowl, faucet, cabinet = (
        "Bowl|+00.27|+01.10|-00.75",
        first_of(c, "Faucet"),
        first_of(c, "Cabinet"),
    )
    for action, target in (
        ("DirtyObject", bowl),
        ("ToggleObjectOn", faucet),
        ("OpenObject", cabinet),
        ("PickupObject", bowl),
    ):
        _far_from(c, target)
        refused = _do(c, action, objectId=target)
        assert not refused["lastActionSuccess"] and "not visible" in refused["errorMessage"]
        forced = _do(c, action, objectId=target, forceAction=True)
        assert forced["lastActionSuccess"], (action, forced["errorMessage"])
    assert obj(c.last_event, bowl)["isDirty"] and obj(c.last_event, faucet)["isToggled"]
    assert obj(c.last_event, cabinet)["isOpen"]
    assert c.last_event.metadata["inventoryObjects"][0]["objectId"] == bowl


def test_force_action_never_rescues_unknown_objects_or_capability_rules() -> None:
    c = Controller(scene="FloorPlan1")
    apple, counter = first_of(c, "Apple"), first_of(c, "CounterTop")
    before = state_hash(c)
    for action in ("PickupObject", "OpenObject", "ToggleObjectOn", "DirtyObject", "BreakObject"):
        meta = _do(c, action, objectId="Apple|+09.99|+09.99|+09.99", forceAction=True)
        assert not meta["lastActionSuccess"] and "invalid" in meta["errorMessage"]
    for action, target, message in (
        ("PickupObject", counter, "not pickupable"),
        ("OpenObject", apple, "not openable"),
        ("ToggleObjectOn", apple, "not toggleable"),
        ("DirtyObject", apple, "cannot get dirty"),
        ("PutObject", counter, "not holding"),
    ):
        meta = _do(c, action, objectId=target, forceAction=True)
        assert not meta["lastActionSuccess"] and message in meta["errorMessage"], action
    assert state_hash(c) == before
    _do(c, "PickupObject", objectId=apple, forceAction=True)
    meta = _do(c, "PickupObject", objectId=first_of(c, "Mug"), forceAction=True)
    assert not meta["lastActionSuccess"] and "already holding" in meta["errorMessage"]


def test_forced_put_lifts_the_compatibility_table_but_not_closed_or_specific_receptacles() -> None:
    c = Controller(scene="FloorPlan1")
    apple = first_of(c, "Apple")
    _do(c, "PickupObject", objectId=apple, forceAction=True)
    for target, message in (
        (first_of(c, "Toaster"), "cannot be placed"),
        (first_of(c, "CoffeeMachine"), "cannot be placed"),
        (first_of(c, "Fridge"), "closed"),
    ):
        meta = _do(c, "PutObject", objectId=target)
        assert not meta["lastActionSuccess"]
        forced = _do(c, "PutObject", objectId=target, forceAction=True)
        if target.startswith("Toaster"):
            assert forced["lastActionSuccess"], forced["errorMessage"]
            assert obj(c.last_event, apple)["parentReceptacles"][0] == target
            _do(c, "PickupObject", objectId=apple, forceAction=True)
        else:
            assert not forced["lastActionSuccess"] and message in forced["errorMessage"]


# ----------------------------------------------------------------------------- headings
def test_rotate_takes_any_non_zero_degrees_and_zero_raises() -> None:
    c = Controller(scene="FloorPlan1")
    _do(c, "Teleport", rotation={"x": 0, "y": 0, "z": 0})
    assert _do(c, "RotateRight", degrees=95)["agent"]["rotation"]["y"] == 95
    assert _do(c, "RotateLeft", degrees=100)["agent"]["rotation"]["y"] == 355
    assert _do(c, "RotateRight", degrees=-30.5)["agent"]["rotation"]["y"] == 324.5
    assert _do(c, "RotateRight", degrees=35.5)["agent"]["rotation"]["y"] == 0
    before = state_hash(c)
    with pytest.raises(ValueError, match="Cannot rotate by 0 degrees"):
        c.step(action="RotateLeft", degrees=0)
    assert state_hash(c) == before


def _open_square(c: Controller) -> tuple[int, int]:
    """A reachable cell whose 3x3 neighbourhood is all reachable."""
    reach = c.scene.reachable_set
    return next(
        (i, j)
        for i, j in c.scene.reachable
        if all((i + di, j + dj) in reach for di in (-1, 0, 1) for dj in (-1, 0, 1))
    )


@pytest.mark.parametrize(
    ("heading", "step"),
    [(95, (1, 0)), (-20, (0, 1)), (150, (0, -1)), (45, (1, 1)), (200, (0, -1)), (315, (-1, 1))],
)
def test_moves_follow_the_exact_heading_rounded_to_the_grid(heading: float, step: tuple) -> None:
    c = Controller(scene="FloorPlan201")
    i, j = _open_square(c)
    _do(c, "Teleport", position={"x": i / 4, "z": j / 4}, rotation={"x": 0, "y": heading, "z": 0})
    meta = _do(c, "MoveAhead")
    assert meta["lastActionSuccess"], meta["errorMessage"]
    pos = meta["agent"]["position"]
    assert (round(pos["x"] * 4) - i, round(pos["z"] * 4) - j) == step
    assert meta["agent"]["rotation"]["y"] == heading % 360
    back = _do(c, "MoveBack")
    assert (back["agent"]["position"]["x"], back["agent"]["position"]["z"]) == (i / 4, j / 4)


def test_a_diagonal_move_never_cuts_a_corner() -> None:
    c = Controller(scene="FloorPlan1")
    reach = c.scene.reachable_set
    cell = next(
        (i, j)
        for i, j in c.scene.reachable
        if (i + 1, j + 1) in reach and ((i + 1, j) not in reach) != ((i, j + 1) not in reach)
    )
    _do(c, "Teleport", position={"x": cell[0] / 4, "z": cell[1] / 4}, rotation=45)
    before = state_hash(c)
    meta = _do(c, "MoveAhead")
    assert not meta["lastActionSuccess"] and "not a reachable position" in meta["errorMessage"]
    assert state_hash(c) == before


def test_visibility_follows_the_exact_heading() -> None:
    c = Controller(scene="FloorPlan1")
    apple = first_of(c, "Apple")
    face(c, apple)
    world = c.world
    agent = world.agents[0]
    x, _, z = world.position(world.index_of[apple])
    bearing = math.degrees(math.atan2(x - agent.i / 4, z - agent.j / 4))
    seen = {}
    for offset in (-70, -30, 0, 30, 70):
        yaw = (bearing + offset) % 360
        meta = _do(c, "Teleport", rotation={"x": 0, "y": yaw, "z": 0})
        assert meta["agent"]["rotation"]["y"] == pytest.approx(yaw)
        seen[offset] = obj(c.last_event, apple)["visible"]
        expected = sees_box(
            c.scene,
            agent.i / 4,
            agent.j / 4,
            yaw,
            agent.horizon,
            world.camera_y(agent),
            world.box(world.index_of[apple]),
            world.visibility_distance,
            world.fov,
        )
        assert seen[offset] == expected
    assert seen[0] and seen[30] and seen[-30] and not seen[70] and not seen[-70]


def test_teleport_takes_any_yaw_and_refuses_pitch_or_roll() -> None:
    c = Controller(scene="FloorPlan1")
    assert _do(c, "Teleport", rotation={"x": 0, "y": 49.11111, "z": 0})["agent"]["rotation"][
        "y"
    ] == pytest.approx(49.11111)
    assert (
        _do(
            c,
            "TeleportFull",
            position=_do(c, "Pass")["agent"]["position"],
            rotation=-90,
            horizon=0,
            standing=True,
        )["agent"]["rotation"]["y"]
        == 270
    )
    before = state_hash(c)
    meta = _do(c, "Teleport", rotation={"x": 10, "y": 0, "z": 0})
    assert not meta["lastActionSuccess"]
    assert "No agents currently can change in pitch or roll" in meta["errorMessage"]
    assert state_hash(c) == before


def test_a_held_object_is_carried_along_the_exact_facing() -> None:
    c = Controller(scene="FloorPlan1")
    apple = first_of(c, "Apple")
    face(c, apple)
    _do(c, "PickupObject", objectId=apple)
    _do(c, "Teleport", rotation={"x": 0, "y": 30, "z": 0})
    agent = _do(c, "Pass")["agent"]["position"]
    held = c.world.position(c.world.index_of[apple])
    root = c.world.objs[c.world.index_of[apple]]
    assert held[0] - agent["x"] == pytest.approx(0.3 * math.sin(math.radians(30)))
    assert held[2] - agent["z"] == pytest.approx(0.3 * math.cos(math.radians(30)))
    assert root.holder == 0
