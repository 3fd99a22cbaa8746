"""Scene set-up actions of AI2-THOR clients on the embedded simulator: Initialize and
InitialRandomSpawn, and a MAP-THOR-like pre-initialisation from start to end.

PlaceObjectAtPoint and SetObjectPoses are in ``test_sim_placing.py``, forceAction and exact
headings in ``test_sim_force_and_headings.py``. Points and object ids come from MAP-THOR's
pre-initialisations of the recorded iTHOR scenes.
"""

from __future__ import annotations

import pytest
from conftest import check_containment, first_of, obj, state_hash

from benchmark.sim import Controller
from benchmark.sim.actions import SETUP_ACTIONS
from benchmark.sim.initialize import RENDER_FLAGS


def _do(c: Controller, action: str, **kwargs) -> dict:
    return c.step(action=action, **kwargs).metadata


def _xyz(p: tuple[float, float, float]) -> dict[str, float]:
    return dict(zip("xyz", p, strict=True))


def _layout(c: Controller) -> dict[str, tuple]:
    """objectId -> (position, parentReceptacles) of every object in the metadata."""
    return {
        o["objectId"]: (tuple(o["position"].values()), tuple(o["parentReceptacles"] or ()))
        for o in _do(c, "Pass")["objects"]
    }


# ----------------------------------------------------------------------------- Initialize
def test_initialize_adds_agents_and_keeps_the_first_agent_and_the_objects() -> None:
    c = Controller(scene="FloorPlan1", gridSize=0.25, width=1000, height=1000)
    assert _do(c, "Teleport", position={"x": 1.5, "y": 0.9, "z": -1.5}, rotation=270)[
        "lastActionSuccess"
    ]
    _do(c, "OpenObject", objectId="Cabinet|+00.68|+00.50|-02.20", forceAction=True)
    objects_before = _layout(c)
    ev = c.step(
        action="Initialize",
        gridSize=0.25,
        renderObjectImage=True,
        agentCount=3,
        visibilityDistance=1.0,
        fieldOfView=60,
    )
    assert [e.metadata["lastAction"] for e in ev.events] == ["Initialize"] * 3
    assert all(e.metadata["lastActionSuccess"] for e in ev.events)
    agents = [e.metadata["agent"] for e in ev.events]
    assert agents[0]["position"]["x"] == 1.5 and agents[0]["position"]["z"] == -1.5
    assert agents[0]["rotation"]["y"] == 270
    cells = {(a["position"]["x"], a["position"]["z"]) for a in agents}
    assert len(cells) == 3
    assert all((round(x * 4), round(z * 4)) in c.scene.reachable_set for x, z in cells)
    assert ev.metadata["fov"] == 60 and ev.metadata["screenWidth"] == 1000
    assert c.world.visibility_distance == 1.0
    assert _layout(c) == objects_before
    assert obj(c.last_event, "Cabinet|+00.68|+00.50|-02.20")["isOpen"]


def test_initialize_omitted_parameters_take_thor_defaults_and_reset_keeps_the_constructors() -> (
    None
):
    c = Controller(scene="FloorPlan201", agentCount=3, visibilityDistance=2.0, seed=4)
    ev = c.step(action="Initialize", fieldOfView=70)
    assert len(ev.events) == 1 and c.agent_count == 1
    assert c.world.visibility_distance == 1.5 and ev.metadata["fov"] == 70
    assert c.initialization_parameters["agentCount"] == 3
    assert len(c.reset().events) == 3
    assert c.world.visibility_distance == 2.0


def test_initialize_sets_down_held_objects_where_their_holders_stand() -> None:
    c = Controller(scene="FloorPlan1", agentCount=2, seed=1)
    apple = first_of(c, "Apple")
    assert _do(c, "PickupObject", objectId=apple, agentId=1, forceAction=True)["lastActionSuccess"]
    holder = c.world.agents[1]
    c.step(action="Initialize", agentCount=2)
    meta = c.last_event.events[1].metadata
    assert meta["inventoryObjects"] == []
    apple_meta = obj(c.last_event, apple)
    assert apple_meta["parentReceptacles"] == [first_of(c, "Floor")]
    assert apple_meta["position"]["x"] == pytest.approx(holder.i * 0.25, abs=0.2)


BAD_INIT = [
    ({"agentCount": 9}, "agentCount"),
    ({"gridSize": 0.5}, "gridSize"),
    ({"fieldOfView": 180}, "noninclusive"),
    ({"visibilityDistance": -1}, "visibilityDistance"),
    ({"rotateStepDegrees": 45}, "Invalid values 'rotateStepDegrees': \\$45"),
    ({"rotateStepDegrees": 0}, "non-zero, non-negative"),
    ({"snapToGrid": False}, "snapToGrid"),
    ({"agentMode": "arm"}, "agentMode"),
    ({"renderDepthImage": "yes"}, "True or False"),
    ({"width": 0}, "width"),
    ({"renderDepthImages": True}, "valid arguments are"),
]


@pytest.mark.parametrize(("params", "message"), BAD_INIT)
def test_initialize_validates_like_the_constructor(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Controller(scene="FloorPlan1", **params)
    c = Controller(scene="FloorPlan1", agentCount=2)
    before = state_hash(c)
    with pytest.raises(ValueError, match=message):
        c.step(action="Initialize", **params)
    assert c.agent_count == 2 and state_hash(c) == before


def test_render_flags_and_launcher_arguments_are_accepted_and_documented() -> None:
    c = Controller(
        scene="FloorPlan1",
        **dict.fromkeys(RENDER_FLAGS, True),  # every flag the docs promise, not a sample
        snapToGrid=True,
        rotateStepDegrees=90,
        agentMode="default",
        quality="Very Low",
        headless=True,
        x_display="0.0",
        width=640,
        height=480,
    )
    meta = _do(c, "Pass")
    assert (meta["screenWidth"], meta["screenHeight"]) == (640, 480)
    assert c.initialization_parameters["renderDepthImage"] is True
    # Launcher arguments start Unity; they are no Initialize parameters.
    with pytest.raises(ValueError, match="valid arguments are"):
        c.step(action="Initialize", quality="Very Low")
    assert "renderInstanceSegmentation" in (Controller.__doc__ or "")
    ev = c.step(action="Initialize", **dict.fromkeys(RENDER_FLAGS, True))
    assert ev.metadata["lastActionSuccess"]


def test_rotate_step_degrees_sets_the_default_turn() -> None:
    c = Controller(scene="FloorPlan1", rotateStepDegrees=180)
    before = c.world.agents[0].rotation
    assert _do(c, "RotateRight")["agent"]["rotation"]["y"] == (before + 180) % 360
    c.step(action="Initialize", rotateStepDegrees=270)
    assert _do(c, "RotateLeft")["agent"]["rotation"]["y"] == (before + 180 - 270) % 360


def test_setup_actions_are_refused_in_multi_step() -> None:
    c = Controller(scene="FloorPlan1", agentCount=2)
    with pytest.raises(ValueError, match="sets the scene up"):
        c.multi_step([{"action": "InitialRandomSpawn"}, None])
    with pytest.raises(ValueError, match="sets the scene up"):
        c.multi_step([{"action": "Initialize", "agentCount": 2}, None])


def test_every_setup_argument_reaches_its_handler() -> None:
    import inspect

    for name, spec in SETUP_ACTIONS.items():
        params = inspect.signature(spec.handler).parameters
        for arg in {**spec.required, **spec.optional}:
            assert arg in params, f"{name}: handler lacks {arg}"


def test_unknown_setup_arguments_raise_naming_the_valid_ones() -> None:
    c = Controller(scene="FloorPlan1")
    with pytest.raises(ValueError, match=r"valid arguments are .*randomSeed"):
        c.step(action="InitialRandomSpawn", randomseed=3)
    with pytest.raises(ValueError, match=r"valid arguments are .*forceKinematic"):
        c.step(
            action="PlaceObjectAtPoint",
            objectId=first_of(c, "Apple"),
            position={"x": 0, "y": 1, "z": 0},
            forceAction=True,
        )


# ----------------------------------------------------------------------------- InitialRandomSpawn
def _moved(before: dict, after: dict) -> list[str]:
    return [oid for oid in before if before[oid][0] != after[oid][0]]


def test_initial_random_spawn_is_a_function_of_the_seed_and_keeps_ids() -> None:
    layouts = []
    for seed in (7, 7, 8):
        c = Controller(scene="FloorPlan1")
        before = _layout(c)
        meta = _do(c, "InitialRandomSpawn", randomSeed=seed)
        assert meta["lastActionSuccess"], meta["errorMessage"]
        after = _layout(c)
        assert set(after) == set(before)
        check_containment(_do(c, "Pass"))
        layouts.append(after)
        moved = _moved(before, after)
        pickupable = [o for o in meta["objects"] if o["pickupable"]]
        assert len(moved) > len(pickupable) / 2
        by_id = {o["objectId"]: o for o in meta["objects"]}
        for oid in moved:
            parent = by_id[by_id[oid]["parentReceptacles"][0]]
            assert parent["objectType"] != "Floor"
            assert c.world.facts.accepts(parent["objectType"], by_id[oid]["objectType"])
    assert layouts[0] == layouts[1] != layouts[2]


def test_initial_random_spawn_honours_force_visible_exclusions_and_restrictions() -> None:
    c = Controller(scene="FloorPlan1")
    apple, mug = first_of(c, "Apple"), first_of(c, "Mug")
    before = _layout(c)
    meta = _do(
        c,
        "InitialRandomSpawn",
        randomSeed=2,
        forceVisible=True,
        excludedReceptacles=["CounterTop"],
        excludedObjectIds=[apple],
        numPlacementAttempts=3,
        placeStationary=False,
    )
    assert meta["lastActionSuccess"]
    after = _layout(c)
    moved = _moved(before, after)
    assert moved and apple not in moved
    by_id = {o["objectId"]: o for o in meta["objects"]}
    for oid in moved:
        parent = by_id[by_id[oid]["parentReceptacles"][0]]
        assert not parent["openable"] and parent["objectType"] != "CounterTop"
    c = Controller(scene="FloorPlan1")
    assert _do(c, "InitialRandomSpawn", randomSeed=2, objectIds=[mug])["lastActionSuccess"]
    assert _moved(before, _layout(c)) == [mug]


def test_initial_random_spawn_lets_go_of_held_objects() -> None:
    c = Controller(scene="FloorPlan1")
    apple = first_of(c, "Apple")
    _do(c, "PickupObject", objectId=apple, forceAction=True)
    meta = _do(c, "InitialRandomSpawn", randomSeed=5)
    assert meta["lastActionSuccess"] and meta["inventoryObjects"] == []
    assert obj(c.last_event, apple)["parentReceptacles"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"numPlacementAttempts": 0}, "numPlacementAttempts must be a positive integer."),
        ({"excludedReceptacles": ["Countertop"]}, "invalid Object Type used in excluded"),
        ({"excludedObjectIds": ["Apple|+09.00|+09.00|+09.00"]}, "Cannot find sim object with id"),
        ({"receptacleObjectIds": ["Nothing"]}, "Cannot find sim object with id 'Nothing'"),
        (
            {"numDuplicatesOfType": [{"objectType": "Apple", "count": 3}]},
            "asks for 3 Apple and the scene holds 1; the embedded simulator cannot create copies",
        ),
        ({"numDuplicatesOfType": [{"objectType": "Aple", "count": 1}]}, "invalid Object Type"),
        ({"allowMoveable": True}, "furniture"),
    ],
)
def test_initial_random_spawn_refusals_are_failures_that_change_nothing(
    kwargs: dict, message: str
) -> None:
    c = Controller(scene="FloorPlan1")
    before = state_hash(c)
    meta = _do(c, "InitialRandomSpawn", **kwargs)
    assert not meta["lastActionSuccess"] and message in meta["errorMessage"]
    assert state_hash(c) == before


def test_initial_random_spawn_duplicate_counts_below_the_present_keep_the_rest() -> None:
    c = Controller(scene="FloorPlan1")
    before = _layout(c)
    apples = [s.object_id for s in c.world.specs if s.object_type == "Apple"]
    meta = _do(
        c,
        "InitialRandomSpawn",
        randomSeed=1,
        numDuplicatesOfType=[{"objectType": "Apple", "count": 0}],
    )
    assert meta["lastActionSuccess"]
    moved = _moved(before, _layout(c))
    assert moved and not set(apples) & set(moved)
    with pytest.raises(ValueError, match="numDuplicatesOfType"):
        c.step(action="InitialRandomSpawn", numDuplicatesOfType=[{"objectType": "Apple"}])


# ----------------------------------------------------------------------------- MAP-THOR sequence
def test_a_mapthor_like_pre_initialisation_runs_end_to_end() -> None:
    """Written from MAP-THOR's documented call sequence for FloorPlan1: construct, Initialize
    three agents, teleport agent 0, place objects at recorded points, switch and open things
    with forceAction, dirty the dishes, turn agent 0 by 95 degrees."""
    c = Controller(width=1000, height=1000, scene="FloorPlan1", gridSize=0.25)
    ev = c.step(
        action="Initialize",
        gridSize=0.25,
        renderObjectImage=True,
        agentCount=3,
        visibilityDistance=1.5,
    )
    assert len(ev.events) == 3 and all(e.metadata["lastActionSuccess"] for e in ev.events)
    meta = _do(
        c, "Teleport", position={"x": 1.5, "y": 0.9, "z": -1.5}, rotation={"x": 0, "y": 270, "z": 0}
    )
    assert meta["lastActionSuccess"], meta["errorMessage"]
    placements = [
        (
            "Bread|-00.52|+01.17|-00.03",
            (-0.5223836302757263, 1.1704490184783936, -0.028279820457100868),
        ),
        (
            "Tomato|-00.39|+01.14|-00.81",
            (-0.3850494921207428, 1.1370344161987305, -0.8119606971740723),
        ),
        (
            "Egg|-02.04|+00.81|+01.24",
            (-0.5013247728347778, 1.2045999765396118, -1.0120956897735596),
        ),
        (
            "Lettuce|-01.81|+00.97|-00.94",
            (-1.8069772720336914, 0.9737606048583984, -0.9429917931556702),
        ),
    ]
    for oid, point in placements:
        meta = _do(c, "PlaceObjectAtPoint", objectId=oid, position=_xyz(point))
        assert meta["lastActionSuccess"], (oid, meta["errorMessage"])
    egg = obj(c.last_event, "Egg|-02.04|+00.81|+01.24")
    assert egg["parentReceptacles"] == ["CounterTop|-00.08|+01.15|00.00"]
    assert (
        "Egg|-02.04|+00.81|+01.24"
        not in obj(c.last_event, first_of(c, "Fridge"))["receptacleObjectIds"]
    )
    faucet = _do(c, "ToggleObjectOn", objectId="Faucet|-02.15|+00.91|-01.50", forceAction=True)
    assert faucet["lastActionSuccess"]
    # iTHOR's light switch starts on; switching it on again fails, as in AI2-THOR.
    light = _do(c, "ToggleObjectOn", objectId="LightSwitch|+02.33|+01.31|-00.16", forceAction=True)
    assert not light["lastActionSuccess"] and "already on" in light["errorMessage"]
    cabinets = [
        "Cabinet|+00.68|+00.50|-02.20",
        "Cabinet|-01.18|+00.50|-02.20",
        "Cabinet|-01.55|+00.50|+00.38",
        "Cabinet|+00.72|+02.02|-02.46",
        "Cabinet|-01.85|+02.02|+00.38",
        "Cabinet|+00.68|+02.02|-02.46",
        "Cabinet|-01.55|+00.50|-01.97",
        "Cabinet|-01.69|+02.02|-02.46",
        "Cabinet|-00.73|+02.02|-02.46",
    ]
    for cabinet in cabinets:
        assert _do(c, "OpenObject", objectId=cabinet, forceAction=True)["lastActionSuccess"]
    for dish in (
        "Bowl|+00.27|+01.10|-00.75",
        "Mug|-01.76|+00.90|-00.62",
        "Pot|-01.22|+00.90|-02.36",
        "Pan|+00.72|+00.90|-02.42",
    ):
        assert _do(c, "DirtyObject", objectId=dish, forceAction=True)["lastActionSuccess"], dish
    meta = _do(c, "RotateRight", degrees=95)
    assert meta["lastActionSuccess"] and meta["agent"]["rotation"]["y"] == 5
    final = c.step(action="Pass")
    objects = {o["objectId"]: o for o in final.metadata["objects"]}
    assert all(objects[k]["isOpen"] for k in cabinets)
    assert objects["Faucet|-02.15|+00.91|-01.50"]["isToggled"]
    assert objects["Pan|+00.72|+00.90|-02.42"]["isDirty"]
    assert final.events[0].metadata["agent"]["rotation"]["y"] == 5
    check_containment(final.metadata)
