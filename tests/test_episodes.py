"""(task, scene, n_agents, seed) determines the episode; set-ups vary the recorded scenes."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.task_files import write_task

from benchmark.sim.facts import scene_splits
from benchmark.tasks.episode import make_episode, pick_scene
from benchmark.tasks.goals import holds
from benchmark.tasks.spec import load_task, load_task_file


def _layout(ep) -> list:
    world = ep.world
    return [
        (o.parent, round(o.x, 4), round(o.z, 4), o.is_open, o.is_toggled) for o in world.objs
    ] + [tuple(a) for a in world.agents]


def test_the_same_inputs_give_the_same_episode_and_other_seeds_differ() -> None:
    task = load_task("transport_produce_fridge_v0")
    a = make_episode(task, "FloorPlan3", 2, seed=5)
    b = make_episode(task, "FloorPlan3", 2, seed=5)
    c = make_episode(task, "FloorPlan3", 2, seed=6)
    assert _layout(a) == _layout(b) and [x.key for x in a.checklist] == [x.key for x in b.checklist]
    assert _layout(a) != _layout(c)


def test_pickupables_are_replaced_among_compatible_receptacles() -> None:
    ep = make_episode(load_task("transport_produce_fridge_v0"), "FloorPlan1", 2, seed=0)
    world = ep.world
    moved = 0
    for spec in world.specs:
        st, recorded = world.objs[spec.index], world.scene.initial[spec.index]
        if spec.pickupable and st.parent != recorded.parent:
            moved += 1
            parent = world.specs[st.parent]
            if not parent.pickupable:
                assert world.facts.accepts(parent.object_type, spec.object_type)
    assert moved >= 10


def test_search_targets_start_hidden_in_closed_receptacles() -> None:
    task = load_task("search_valuables_living_room_v0")
    for seed in range(4):
        ep = make_episode(task, None, 2, seed)
        for atom in ep.checklist:
            index = ep.world.index_of[atom.subject]
            assert ep.world.enclosed(index), (seed, atom.key)


def test_rearrange_targets_start_away_from_home_and_switch_off_things_start_on() -> None:
    ep = make_episode(load_task("rearrange_kitchen_v0"), None, 2, seed=1)
    assert ep.checklist and not any(holds(ep.world, a) for a in ep.checklist)
    ep = make_episode(load_task("switch_off_kitchen_v0"), None, 2, seed=1)
    knobs = [a for a in ep.checklist if a.subject.startswith("StoveKnob")]
    assert knobs and not any(holds(ep.world, a) for a in knobs)


def test_the_scene_is_chosen_by_seed_from_the_eligible_split() -> None:
    task = load_task("transport_sofa_tidy_v0")
    chosen = {pick_scene(task, seed, "test") for seed in range(40)}
    assert chosen <= set(scene_splits()["test"]) and len(chosen) > 3
    assert pick_scene(task, 7, "train") == pick_scene(task, 7, "train")


def test_the_explicit_instruction_names_the_grounded_objects() -> None:
    ep = make_episode(load_task("transport_bed_tidy_v0"), None, 2, seed=0)
    for atom in ep.checklist:
        assert atom.subject in ep.instructions["explicit"]
    assert "|" not in ep.instructions["implicit"]


def _task_file(tmp_path: Path, goal: list[str], scenes: dict, setup: dict | None = None) -> Path:
    return write_task(
        tmp_path, "prepare_states_v0", goal, scenes, setup=setup, agents=(1, 2), limits=(100, 50)
    )


def test_setup_opens_and_dirties_what_it_names(tmp_path: Path) -> None:
    path = _task_file(
        tmp_path,
        ["all: isOpen(Cabinet)=false", "all: isDirty(Bowl)=false"],
        {"list": ["FloorPlan1"]},
        {"open": ["Cabinet"], "dirty": ["Bowl", "Mug"]},
    )
    ep = make_episode(load_task_file(path), "FloorPlan1", 1, seed=0)
    world = ep.world
    cabinets = [s for s in world.specs if s.object_type == "Cabinet" and s.openable]
    dishes = [s for s in world.specs if s.object_type in ("Bowl", "Mug")]
    assert cabinets and all(world.objs[s.index].is_open for s in cabinets)
    assert dishes and all(world.objs[s.index].is_dirty for s in dishes)
    assert ep.checklist and not any(holds(world, a) for a in ep.checklist)
    plain = make_episode(load_task("transport_produce_fridge_v0"), "FloorPlan1", 1, seed=0)
    assert not any(plain.world.objs[s.index].is_dirty for s in dishes)


def test_all_over_a_type_the_scene_lacks_grounds_to_no_atom(tmp_path: Path) -> None:
    # FloorPlan1, a kitchen, has a light switch but no floor lamp.
    goal = ["all: isToggled(LightSwitch)=false", "all: isToggled(FloorLamp)=false"]
    path = _task_file(
        tmp_path,
        goal,
        {"list": ["FloorPlan1", "FloorPlan201"]},
        {"switch_on": ["LightSwitch", "FloorLamp"]},
    )
    task = load_task_file(path)
    assert task.eligible_scenes() == ["FloorPlan1", "FloorPlan201"]
    kitchen = make_episode(task, "FloorPlan1", 1, seed=0)
    assert {a.subject.split("|")[0] for a in kitchen.checklist} == {"LightSwitch"}
    living = make_episode(task, "FloorPlan201", 1, seed=0)
    assert {a.subject.split("|")[0] for a in living.checklist} == {"LightSwitch", "FloorLamp"}


def test_a_goal_with_nothing_to_do_in_a_scene_makes_it_ineligible_and_says_why(
    tmp_path: Path,
) -> None:
    path = _task_file(
        tmp_path,
        ["all: isToggled(FloorLamp)=false", "all: inside(Pillow, Sofa)"],
        {"list": ["FloorPlan1", "FloorPlan201"]},
    )
    task = load_task_file(path)
    assert task.eligible_scenes() == ["FloorPlan201"]
    with pytest.raises(ValueError, match="every goal clause grounds to no atom in FloorPlan1"):
        make_episode(task, "FloorPlan1", 1, seed=0)
    assert make_episode(task, None, 1, seed=0).scene == "FloorPlan201"
    # 'any' asks for an object: a scene without one stays ineligible.
    path = _task_file(tmp_path, ["any: isToggled(FloorLamp)"], {"list": ["FloorPlan1"]})
    assert load_task_file(path).eligible_scenes() == []
