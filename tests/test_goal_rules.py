"""Goals on objects made by actions, and goals the simulator's rules can never satisfy."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import face, first_of
from helpers.task_files import write_task

from benchmark.sim import Controller
from benchmark.sim.arrange import reachable_by_sight
from benchmark.tasks.episode import make_episode
from benchmark.tasks.goal_rules import ImpossibleGoal, check_clause, type_capabilities
from benchmark.tasks.goals import Atom, holds, parse_clause
from benchmark.tasks.spec import TaskSpec, TaskSpecError, load_task_file, task_registry

CAPABILITY_FIELDS = ("pickupable", "receptacle", "openable", "toggleable", "sliceable")
CAPABILITY_FIELDS += ("cookable", "breakable", "dirtyable", "can_fill")
KITCHENS = {"room_types": ["kitchens"]}


def _task(tmp_path: Path, task_id: str, goal: list[str], scenes: dict) -> Path:
    return write_task(tmp_path, task_id, goal, scenes)


def _do(c: Controller, action: str, **kwargs) -> None:
    meta = c.step(action=action, **kwargs).metadata
    assert meta["lastActionSuccess"], (action, meta["errorMessage"])


# ----------------------------------------------------------------------------- derived objects
def test_a_sliced_pick_and_place_goal_grounds_in_every_kitchen(tmp_path: Path) -> None:
    task = load_task_file(
        _task(
            tmp_path,
            "prepare_tomato_plate_v0",
            ["any: inside(TomatoSliced, Plate)"],
            {"list": ["FloorPlan1", "FloorPlan2", "FloorPlan201"]},
        )
    )
    # FloorPlan201 has a Plate but no Tomato to slice.
    assert task.eligible_scenes() == ["FloorPlan1", "FloorPlan2"]
    ep = make_episode(task, "FloorPlan1", 1, seed=0)
    assert [a.key for a in ep.checklist] == ["#1 inside(TomatoSliced,Plate)=true"]
    assert not any(s.object_type == "TomatoSliced" for s in ep.world.specs)
    assert not holds(ep.world, ep.checklist[0])


def test_the_slice_atom_holds_once_a_piece_made_in_the_episode_rests_on_a_plate() -> None:
    c = Controller(scene="FloorPlan1", agentCount=1, seed=0)
    world = c.world
    atom = Atom("inside", "TomatoSliced", "Plate", True, 1)
    tomato, knife, plate = (first_of(c, t) for t in ("Tomato", "ButterKnife", "Plate"))
    face(c, knife)
    _do(c, "PickupObject", objectId=knife)
    face(c, tomato)
    before = len(world.specs)
    _do(c, "SliceObject", objectId=tomato)
    assert len(world.specs) == before + 4 and not holds(world, atom)
    pieces = [s for s in world.specs if s.object_type == "TomatoSliced"]
    for piece in pieces:  # the capabilities the load-time check assumes are the simulator's
        flags = {f for f in CAPABILITY_FIELDS if getattr(piece, f)}
        assert flags == type_capabilities()["TomatoSliced"]
    _do(c, "DropHandObject")
    face(c, pieces[0].object_id)
    _do(c, "PickupObject", objectId=pieces[0].object_id)
    cabinet = world.specs[world.objs[world.index_of[plate]].parent].object_id
    face(c, cabinet)  # in FloorPlan1 the plate is in a closed cabinet
    _do(c, "OpenObject", objectId=cabinet)
    face(c, plate)
    assert not holds(world, atom)
    _do(c, "PutObject", objectId=plate)
    assert holds(world, atom)
    assert not holds(world, Atom("inside", "TomatoSliced", "Plate", True, 2))


def test_registered_goals_on_made_objects_ground_as_before() -> None:
    ep = make_episode(task_registry()["prepare_toast_v0"], "FloorPlan1", 2, seed=0)
    assert [a.key for a in ep.checklist] == [
        "#1 isCooked(BreadSliced)=true",
        "#2 isCooked(BreadSliced)=true",
    ]


def test_made_objects_need_a_reachable_source_and_tool(tmp_path: Path) -> None:
    sliced = parse_clause("any: inside(TomatoSliced, Plate)")
    cracked = parse_clause("any: isCooked(EggCracked)")
    task = load_task_file(
        _task(
            tmp_path, "prepare_egg_tomato_v0", [sliced.text, cracked.text], {"list": ["FloorPlan1"]}
        )
    )
    ep = make_episode(task, "FloorPlan1", 1, seed=0)
    world = ep.world
    for spec in world.specs:  # take every slicing tool out of the scene
        if spec.object_type in world.facts.slicing_tools:
            world.update(spec.index, active=False)
    reach = lambda k: reachable_by_sight(world, k)  # noqa: E731
    with pytest.raises(ImpossibleGoal, match="no reachable ButterKnife or Knife to slice with"):
        check_clause(world, sliced, ep.checklist[:1], reach)
    check_clause(world, cracked, ep.checklist[1:], reach)  # an egg can still be broken


def test_all_over_a_made_type_is_rejected_with_a_suggestion(tmp_path: Path) -> None:
    path = _task(tmp_path, "prepare_all_slices_v0", ["all: inside(TomatoSliced, Plate)"], KITCHENS)
    with pytest.raises(TaskSpecError) as info:
        load_task_file(path)
    message = str(info.value)
    assert str(path) in message and "'goal[0]'" in message
    assert "slicing a Tomato" in message and "use 'any:' or 'count>=k:'" in message


# ----------------------------------------------------------------------------- impossible goals
@pytest.mark.parametrize(
    ("clause", "rule"),
    [
        ("all: inside(Apple, Toaster)", "a Apple can be put only in Bowl, CoffeeTable"),
        ("all: inside(Faucet, CounterTop)", "no Faucet has pickupable=true"),
        ("all: isToggled(Sofa)=false", "no Sofa has toggleable=true"),
        ("any: isToggled(StoveBurner)", "no StoveBurner has toggleable=true"),
        ("all: isOpen(Apple)", "no Apple has openable=true"),
        ("any: isSliced(BreadSliced)", "no BreadSliced has sliceable=true"),
        ("any: isCooked(TomatoSliced)", "no TomatoSliced has cookable=true"),
        ("all: isDirty(Apple)", "no Apple has dirtyable=true"),
        ("any: filledWith(Apple, water)", "no Apple has canFillWithLiquid=true"),
        ("all: inside(Aple, Fridge)", "Aple is not an object type"),
    ],
)
def test_a_clause_no_object_of_its_types_can_satisfy_is_rejected_at_load(
    tmp_path: Path, clause: str, rule: str
) -> None:
    path = _task(tmp_path, "prepare_impossible_v0", ["any: isCooked(Potato)", clause], KITCHENS)
    with pytest.raises(TaskSpecError) as info:
        load_task_file(path)
    message = str(info.value)
    assert str(path) in message and "'goal[1]'" in message and clause in message
    assert "can never hold" in message and rule in message


def test_a_clause_an_instance_cannot_satisfy_is_rejected_when_the_episode_is_built(
    tmp_path: Path,
) -> None:
    # Some Sinks are receptacles, FloorPlan1's is not, and its SinkBasin does not rest in it.
    path = _task(tmp_path, "prepare_mug_sink_v0", ["all: inside(Mug, Sink)"], KITCHENS)
    task = load_task_file(path)
    with pytest.raises(ValueError) as info:
        make_episode(task, "FloorPlan1", 1, seed=0)
    message = str(info.value)
    assert (
        str(path) in message and "'all: inside(Mug, Sink)' can never hold in FloorPlan1" in message
    )
    assert "not a receptacle here" in message and isinstance(info.value.__cause__, ImpossibleGoal)
    ep = make_episode(task, None, 1, seed=0)  # a scene chosen by seed skips such scenes
    sinks = [s for s in ep.world.specs if s.object_type == "Sink"]
    assert any(s.receptacle for s in sinks)


def test_a_count_beyond_what_the_scene_can_make_is_rejected(tmp_path: Path) -> None:
    path = _task(
        tmp_path,
        "prepare_many_toasts_v0",
        ["count>=7: isCooked(BreadSliced)"],
        {"list": ["FloorPlan1"]},
    )
    with pytest.raises(ValueError, match=r"needs 7 BreadSliced.*can make 6"):
        make_episode(load_task_file(path), None, 1, seed=0)


def test_a_goal_impossible_in_every_scene_says_why(tmp_path: Path) -> None:
    # The table lets a Statue reach a Fridge only through receptacles that never move there.
    path = _task(tmp_path, "prepare_statue_fridge_v0", ["all: inside(Statue, Fridge)"], KITCHENS)
    task = load_task_file(path)
    assert task.eligible_scenes()
    with pytest.raises(ValueError, match=r"cannot be set up in any eligible scene: .*Statue"):
        make_episode(task, None, 1, seed=0)


def test_a_goal_reached_through_a_nested_receptacle_is_not_rejected(tmp_path: Path) -> None:
    """No Sofa accepts a Statue, but a Box does and a Sofa accepts a Box."""
    task = load_task_file(
        _task(
            tmp_path,
            "prepare_statue_sofa_v0",
            ["all: inside(Statue, Sofa)"],
            {"list": ["FloorPlan201"]},
        )
    )
    ep = make_episode(task, "FloorPlan201", 1, seed=0)
    assert ep.checklist
    c = Controller(scene="FloorPlan201", agentCount=1, seed=0)
    statue, box, sofa = (first_of(c, t) for t in ("Statue", "Box", "Sofa"))
    assert not c.world.facts.accepts("Sofa", "Statue")
    face(c, statue)
    _do(c, "PickupObject", objectId=statue)
    face(c, box)
    _do(c, "PutObject", objectId=box)
    _do(c, "PickupObject", objectId=box)
    face(c, sofa)
    _do(c, "PutObject", objectId=sofa)
    assert holds(c.world, Atom("inside", statue, "Sofa", True))


@pytest.mark.parametrize("task_id", sorted(task_registry()))
def test_every_registered_task_builds_in_its_eligible_scenes(task_id: str) -> None:
    """The rules reject nothing the registered tasks ask; a scene may only fail for want of
    something reachable in that layout."""
    task: TaskSpec = task_registry()[task_id]
    built = 0
    for scene in task.eligible_scenes():
        try:
            make_episode(task, scene, task.min_agents, seed=0)
        except ValueError as err:
            assert not isinstance(err.__cause__, ImpossibleGoal), str(err)
        else:
            built += 1
    assert built >= len(task.eligible_scenes()) / 2
