"""Several agents in one scene: no overlap, one holder per object, and the documented,
deterministic conflict rule of ``multi_step``."""

from __future__ import annotations

import pytest
from conftest import face, first_of, obj, state_hash

from benchmark.sim import Controller


def _place(c: Controller, agent: int, i: int, j: int, rotation: int) -> None:
    meta = (
        c.step(
            action="Teleport",
            position={"x": i * 0.25, "z": j * 0.25},
            rotation=rotation,
            horizon=0,
            agentId=agent,
        )
        .events[agent]
        .metadata
    )
    assert meta["lastActionSuccess"], meta["errorMessage"]


def _corridor(c: Controller, length: int) -> tuple[int, int]:
    """A cell with ``length`` reachable cells in a row towards +x."""
    reach = c.scene.reachable_set
    for i, j in c.scene.reachable:
        if all((i + d, j) in reach for d in range(length)):
            return i, j
    raise AssertionError("no corridor")


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_agents_start_on_distinct_reachable_cells(n: int) -> None:
    for seed in range(10):
        c = Controller(scene="FloorPlan201", agentCount=n, seed=seed)
        cells = [(a.i, a.j) for a in c.world.agents]
        assert len(set(cells)) == n and all(cell in c.scene.reachable_set for cell in cells)
    a = Controller(scene="FloorPlan201", agentCount=3, seed=4).world.agents
    assert a == Controller(scene="FloorPlan201", agentCount=3, seed=4).world.agents
    assert a != Controller(scene="FloorPlan201", agentCount=3, seed=5).world.agents


def test_an_agent_cannot_walk_into_another() -> None:
    c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
    i, j = _corridor(c, 2)
    _place(c, 0, i, j, 90)
    _place(c, 1, i + 1, j, 90)
    meta = c.step(action="MoveAhead", agentId=0).events[0].metadata
    assert not meta["lastActionSuccess"] and "agent 1 is standing" in meta["errorMessage"]
    meta = c.step(action="Teleport", position={"x": (i + 1) * 0.25, "z": j * 0.25}, agentId=0)
    assert not meta.events[0].metadata["lastActionSuccess"]


def test_two_agents_reaching_for_one_object_the_tick_leader_gets_it() -> None:
    for leader in (0, 1):
        c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
        apple = first_of(c, "Apple")
        face(c, apple, agent=0)
        face(c, apple, agent=1)  # the face() steps advance the tick: 2 steps so far
        if leader == 1:
            c.step(action="Pass")
        assert c.tick % 2 == leader
        ev = c.multi_step([{"action": "PickupObject", "objectId": apple}] * 2)
        winner = ev.events[leader].metadata
        loser = ev.events[1 - leader].metadata
        assert winner["lastActionSuccess"]
        assert not loser["lastActionSuccess"] and f"held by agent {leader}" in loser["errorMessage"]
        assert obj(ev, apple)["isPickedUp"]


def test_agents_cannot_swap_cells_through_each_other() -> None:
    c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
    i, j = _corridor(c, 2)
    _place(c, 0, i, j, 90)
    _place(c, 1, i + 1, j, 270)
    before = state_hash(c)
    ev = c.multi_step(["MoveAhead", "MoveAhead"])
    assert not any(e.metadata["lastActionSuccess"] for e in ev.events)
    assert state_hash(c) == before


def test_a_follower_moves_into_a_vacated_cell_only_after_the_leader_moved() -> None:
    c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
    i, j = _corridor(c, 3)
    _place(c, 0, i + 1, j, 90)  # ahead
    _place(c, 1, i, j, 90)  # behind, same heading
    assert c.tick % 2 == 0  # agent 0, ahead, goes first
    ev = c.multi_step(["MoveAhead", "MoveAhead"])
    assert all(e.metadata["lastActionSuccess"] for e in ev.events)
    _place(c, 1, i, j, 90)
    _place(c, 0, i + 1, j, 90)
    if c.tick % 2 == 0:
        c.step(action="Pass")
    assert c.tick % 2 == 1  # agent 1, behind, goes first: blocked by agent 0
    ev = c.multi_step(["MoveAhead", "MoveAhead"])
    assert ev.events[0].metadata["lastActionSuccess"]
    assert not ev.events[1].metadata["lastActionSuccess"]


def test_an_object_held_by_one_agent_is_out_of_reach_of_the_others() -> None:
    c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
    mug = first_of(c, "Mug")
    face(c, mug, agent=0)
    assert (
        c.step(action="PickupObject", objectId=mug, agentId=0)
        .events[0]
        .metadata["lastActionSuccess"]
    )
    for action in ("PickupObject", "DirtyObject", "BreakObject"):
        meta = c.step(action=action, objectId=mug, agentId=1, forceAction=True).events[1].metadata
        assert not meta["lastActionSuccess"] and "held by agent 0" in meta["errorMessage"]


def test_a_malformed_action_in_multi_step_changes_nothing() -> None:
    c = Controller(scene="FloorPlan1", agentCount=3, seed=2)
    before = state_hash(c)
    with pytest.raises(ValueError):
        c.multi_step(["MoveAhead", {"action": "RotateLeft", "degrees": 0}, "MoveAhead"])
    with pytest.raises(ValueError):
        c.multi_step(["MoveAhead", "Fly", None])
    with pytest.raises(ValueError, match="list of 3 actions"):
        c.multi_step(["MoveAhead"])
    assert state_hash(c) == before


def test_single_steps_keep_the_other_agents_last_action() -> None:
    c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
    c.step(action="RotateLeft", agentId=1)
    ev = c.step(action="LookDown", agentId=0)
    assert ev.metadata["agentId"] == 0 and ev.metadata["lastAction"] == "LookDown"
    assert ev.events[1].metadata["lastAction"] == "RotateLeft"
    assert ev.events[1].metadata["agent"]["cameraHorizon"] == 0
