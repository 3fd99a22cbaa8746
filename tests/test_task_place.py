"""Task files that name single floor plans: objects put at recorded points (``setup.place``),
goal clauses per floor plan (``scene_goals``), and the ``source`` tag of tasks taken from other
suites, on the recorded iTHOR scenes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from benchmark.env import make_env
from benchmark.sim import Controller
from benchmark.tasks.episode import make_episode
from benchmark.tasks.goals import holds
from benchmark.tasks.spec import TaskSpecError, load_task_file, task_registry

# MAP-THOR's bread/lettuce/tomato pre-initialisation of FloorPlan2: the lettuce, recorded in
# the fridge, is put on a countertop.
LETTUCE2 = "Lettuce|-01.71|+00.82|-00.14"
POINT2 = [-0.11696076393127419, 1.8335982859134674, 0.46363327503204355]
LETTUCE1 = "Lettuce|-01.81|+00.97|-00.94"
BASE = {
    "id": "transport_lettuce_fridge_v0",
    "family": "transport",
    "instructions": {
        "explicit": "Put {subjects} in {targets}.",
        "types": "Put the lettuce in the fridge.",
        "implicit": "Keep the salad cold.",
    },
    "scenes": {"list": ["FloorPlan1", "FloorPlan2"]},
    "agents": {"min": 1, "max": 2},
    "limits": {"ticks": 300, "decisions": 120},
    "setup": {
        "randomize": False,
        "place": {"FloorPlan2": [{"object": LETTUCE2, "position": POINT2}]},
    },
    "goal": ["all: inside(Lettuce, Fridge)"],
}


def _write(root: Path, data: dict, folder: str = "transport") -> Path:
    path = root / folder / f"{data['id']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def _changed(**changes) -> dict:
    data = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    return data


def _parent_type(world, object_id: str) -> str:
    return world.specs[world.objs[world.index_of[object_id]].parent].object_type


def test_place_puts_the_object_at_the_point_on_its_floor_plan_only(tmp_path: Path) -> None:
    task = load_task_file(_write(tmp_path, BASE))
    ep = make_episode(task, "FloorPlan2", 2, seed=0)
    world = ep.world
    recorded = Controller(scene="FloorPlan2").world
    assert _parent_type(recorded, LETTUCE2) == "Fridge"
    assert _parent_type(world, LETTUCE2) == "CounterTop"
    x, _, z = world.position(world.index_of[LETTUCE2])
    assert (x, z) == (POINT2[0], POINT2[2])
    assert [a.key for a in ep.checklist] == [f"inside({LETTUCE2},Fridge)=true"]
    assert not holds(world, ep.checklist[0])
    # FloorPlan1 has no placement: its lettuce stays where iTHOR recorded it.
    other = make_episode(task, "FloorPlan1", 2, seed=0).world
    before = Controller(scene="FloorPlan1").world
    k = other.index_of[LETTUCE1]
    assert other.objs[k].parent == before.objs[k].parent
    assert other.position(k) == before.position(k)


def test_a_type_names_the_one_object_of_that_type(tmp_path: Path) -> None:
    data = _changed(**{"setup.place": {"FloorPlan2": [{"object": "Lettuce", "position": POINT2}]}})
    ep = make_episode(load_task_file(_write(tmp_path, data)), "FloorPlan2", 1, seed=0)
    assert _parent_type(ep.world, LETTUCE2) == "CounterTop"


@pytest.mark.parametrize(
    ("place", "field", "expected"),
    [
        ({"FloorPlan7": []}, "setup.place.FloorPlan7", "a floor plan of the task's scenes"),
        ({"Kitchen": []}, "setup.place.Kitchen", "a floor plan of the task's scenes"),
        ({"FloorPlan2": []}, "setup.place.FloorPlan2", "non-empty list"),
        (
            {"FloorPlan2": [{"object": LETTUCE1, "position": POINT2}]},
            "setup.place.FloorPlan2[0].object",
            "an objectId of the recorded FloorPlan2",
        ),
        (
            {"FloorPlan2": [{"object": "Pineapple", "position": POINT2}]},
            "setup.place.FloorPlan2[0].object",
            "a type FloorPlan2 holds exactly one of (0 Pineapple",
        ),
        (
            {"FloorPlan2": [{"object": "Drawer", "position": POINT2}]},
            "setup.place.FloorPlan2[0].object",
            "(13 Drawer there; give an objectId)",
        ),
        (
            {"FloorPlan2": [{"object": "Fridge", "position": POINT2}]},
            "setup.place.FloorPlan2[0].object",
            "a pickupable object",
        ),
        (
            {"FloorPlan2": [{"object": LETTUCE2, "position": [1.0, 2.0]}]},
            "setup.place.FloorPlan2[0].position",
            "three finite numbers",
        ),
        (
            {"FloorPlan2": [{"object": LETTUCE2, "position": [1.0, "up", 2.0]}]},
            "setup.place.FloorPlan2[0].position",
            "three finite numbers",
        ),
        (
            {"FloorPlan2": [{"object": LETTUCE2, "position": [1.0, float("nan"), 2.0]}]},
            "setup.place.FloorPlan2[0].position",
            "three finite numbers",
        ),
        (
            {"FloorPlan2": [{"object": LETTUCE2, "point": POINT2}]},
            "setup.place.FloorPlan2[0]",
            "'object' and 'position'",
        ),
        (
            {
                "FloorPlan2": [{"object": LETTUCE2, "position": POINT2}],
                "FloorPlan2_physics": [{"object": LETTUCE2, "position": POINT2}],
            },
            "setup.place.FloorPlan2_physics",
            "one entry per floor plan",
        ),
    ],
)
def test_a_malformed_placement_is_rejected_naming_the_file_and_field(
    tmp_path: Path, place: dict, field: str, expected: str
) -> None:
    path = _write(tmp_path, _changed(**{"setup.place": place}))
    with pytest.raises(TaskSpecError) as err:
        load_task_file(path)
    assert str(path) in str(err.value)
    assert f"field '{field}'" in str(err.value)
    assert expected in str(err.value)


def test_a_placement_the_simulator_refuses_names_the_object_point_and_message(
    tmp_path: Path,
) -> None:
    far = [40.0, 1.0, 40.0]
    data = _changed(**{"setup.place": {"FloorPlan2": [{"object": LETTUCE2, "position": far}]}})
    task = load_task_file(_write(tmp_path, data))
    with pytest.raises(ValueError) as err:
        make_env(task, scene="FloorPlan2", n_agents=1, seed=0).reset()
    message = str(err.value)
    assert "cannot be set up in FloorPlan2" in message
    assert f"PlaceObjectAtPoint {LETTUCE2} at (40.0, 1.0, 40.0) failed" in message
    assert "is not within scene bounds" in message  # the simulator's own message
    # Chosen by seed, the scene that cannot be set up is skipped.
    assert make_episode(task, None, 1, seed=0).scene == "FloorPlan1"


def test_scene_goals_add_clauses_on_their_floor_plan(tmp_path: Path) -> None:
    data = _changed(
        goal=[],
        scene_goals={
            "FloorPlan1": ["all: inside(Lettuce, Fridge)"],
            "FloorPlan2": [f"all: inside({LETTUCE2}, Fridge)", "all: isOpen(Fridge)=false"],
        },
    )
    task = load_task_file(_write(tmp_path, data))
    env = make_env(task, scene="FloorPlan2", n_agents=2, seed=0)
    env.reset()
    keys = [a.key for a in env.episode.checklist]
    assert keys[0] == f"inside({LETTUCE2},Fridge)=true" and keys[1].startswith("isOpen(Fridge|")
    assert env.task_info().goal == (f"all: inside({LETTUCE2}, Fridge)", "all: isOpen(Fridge)=false")
    one = make_env(task, scene="FloorPlan1", n_agents=2, seed=0)
    one.reset()
    assert [a.key for a in one.episode.checklist] == [f"inside({LETTUCE1},Fridge)=true"]


@pytest.mark.parametrize(
    ("changes", "field", "expected"),
    [
        ({"goal": [], "scene_goals": {"FloorPlan1": ["all: isOpen(Fridge)"]}}, "goal", "non-empty"),
        (
            {"scene_goals": {"FloorPlan9": ["all: isOpen(Fridge)"]}},
            "scene_goals.FloorPlan9",
            "scenes",
        ),
        (
            {"scene_goals": {"FloorPlan1": [f"all: inside({LETTUCE2}, Fridge)"]}},
            "scene_goals.FloorPlan1[0]",
            "objectIds of the recorded FloorPlan1",
        ),
        (
            {"scene_goals": {"FloorPlan1": ["all: inside(Lettuce, Toaster)"]}},
            "scene_goals.FloorPlan1[0]",
            "a clause that can hold",
        ),
        ({"source": {"suite": "mapthor", "name": "x", "level": 5}}, "source.level", "[1, 2, 3, 4]"),
        (
            {"source": {"suite": "mapthor", "name": "x", "level": 2.0}},
            "source.level",
            "[1, 2, 3, 4]",
        ),
        (
            {"scene_goals": {"FloorPlan1": ["all: isOpen(Fridge"]}},
            "scene_goals.FloorPlan1[0]",
            "a goal clause (",
        ),
        ({"source": {"suite": "MAP THOR", "name": "x"}}, "source.suite", "lower-case suite name"),
        ({"source": {"suite": "mapthor"}}, "source", "'suite', 'name'"),
    ],
)
def test_malformed_scene_goals_and_sources_are_rejected(
    tmp_path: Path, changes: dict, field: str, expected: str
) -> None:
    path = _write(tmp_path, _changed(**changes))
    with pytest.raises(TaskSpecError) as err:
        load_task_file(path)
    assert f"field '{field}'" in str(err.value) and expected in str(err.value)


def test_a_suites_collection_folder_holds_tasks_tagged_with_that_suite(tmp_path: Path) -> None:
    tagged = _changed(source={"suite": "mapthor", "name": "1_put_lettuce_fridge", "level": 1})
    _write(tmp_path, tagged, folder="mapthor")
    registry = task_registry.__wrapped__(tmp_path)
    task = registry["transport_lettuce_fridge_v0"]
    assert (task.family, task.source.suite, task.source.level) == ("transport", "mapthor", 1)
    other = tmp_path / "other"
    _write(other, BASE, folder="mapthor")
    with pytest.raises(TaskSpecError, match="expected the folder name 'mapthor'"):
        task_registry.__wrapped__(other)
