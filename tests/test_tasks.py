"""Task specs are data: the shipped suite, validation errors, and adding a task without code."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
import yaml

from benchmark.env import make_env
from benchmark.tasks.goals import GoalError, parse_clause
from benchmark.tasks.spec import FAMILIES, TaskSpecError, load_task, load_task_file, task_registry

GOOD = {
    "id": "transport_demo_v0",
    "family": "transport",
    "instructions": {
        "explicit": "Put {subjects} in {targets}.",
        "types": "Put apples in the fridge.",
        "implicit": "Keep the fruit cold.",
    },
    "scenes": {"room_types": ["kitchens"]},
    "agents": {"min": 1, "max": 3},
    "limits": {"ticks": 200, "decisions": 80},
    "goal": ["all: inside(Apple, Fridge)"],
}


def _write(tmp_path: Path, data: dict, family: str = "transport", name: str | None = None) -> Path:
    folder = tmp_path / family
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or data.get('id', 'x')}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_suite_has_24_tasks_over_six_families() -> None:
    tasks = task_registry()
    per_family = collections.Counter(t.family for t in tasks.values())
    assert len(tasks) >= 24
    assert set(per_family) == set(FAMILIES)
    assert all(count >= 4 for count in per_family.values())
    for task in tasks.values():
        assert task.eligible_scenes(), task.id
        assert task.version == 0


def test_heavy_lift_tasks_need_at_least_two_agents() -> None:
    for task in task_registry().values():
        if task.family == "heavy-lift":
            assert task.min_agents == 2 and task.setup.heavy


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        ({"family": "cooking"}, "family", "one of"),
        ({"id": "Transport"}, "id", "lower-case id"),
        ({"instructions": {"explicit": "x"}}, "instructions", "phrasing for each of"),
        ({"scenes": {"room_types": ["garages"]}}, "scenes.room_types", "kitchens"),
        ({"scenes": {"list": ["FloorPlan999"]}}, "scenes.list", "iTHOR scene names"),
        ({"agents": {"min": 3, "max": 2}}, "agents", "1 <= min <= max <= 8"),
        ({"agents": {"min": 1, "max": 9}}, "agents", "1 <= min <= max <= 8"),
        ({"limits": {"ticks": 0, "decisions": 5}}, "limits.ticks", "positive integer"),
        ({"goal": []}, "goal", "non-empty list"),
        ({"goal": ["all: inside(Apple)"]}, "goal[0]", "two arguments"),
        ({"goal": ["most: isOpen(Fridge)"]}, "goal[0]", "cannot parse"),
        ({"goal": ["all: isHot(Apple)"]}, "goal[0]", "unknown predicate"),
        ({"setup": {"hide": "Apple"}}, "setup.hide", "list of strings"),
        ({"setup": {"bury": ["Apple"]}}, "setup", "keys from"),
        ({"setup": {"open": ["Apple"]}}, "setup.open", "no Apple has openable=true"),
        ({"setup": {"dirty": ["Apple"]}}, "setup.dirty", "no Apple has dirtyable=true"),
        ({"setup": {"switch_on": ["Sofa"]}}, "setup.switch_on", "no Sofa has toggleable=true"),
        ({"setup": {"heavy": ["Sofa"]}}, "setup.heavy", "no Sofa has pickupable=true"),
        ({"setup": {"hide": ["Aple"]}}, "setup.hide", "Aple is not an object type"),
        ({"setup": {"displace": ["AppleSliced"]}}, "setup.displace", "made by an action"),
        (
            {"capabilities": [{"name": "weak", "cannot": ["fly"]}]},
            "capabilities[0].cannot",
            "skills from",
        ),
        ({"colour": "red"}, "colour", "unknown field"),
    ],
)
def test_a_malformed_task_names_the_file_and_field(
    tmp_path: Path, change: dict, field: str, expected: str
) -> None:
    path = _write(tmp_path, {**GOOD, **change}, name="transport_demo_v0")
    with pytest.raises(TaskSpecError) as info:
        load_task_file(path)
    message = str(info.value)
    assert str(path) in message and f"'{field}'" in message and expected in message


def test_invalid_yaml_and_mismatched_names_are_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "transport" / "transport_demo_v0.yaml"
    bad.parent.mkdir()
    bad.write_text("id: [unclosed\n")
    with pytest.raises(TaskSpecError, match="not valid YAML"):
        load_task_file(bad)
    path = _write(tmp_path, GOOD, name="transport_other_v0")
    with pytest.raises(TaskSpecError, match="the file name"):
        load_task_file(path)
    path = _write(tmp_path / "x", GOOD, family="search")
    with pytest.raises(TaskSpecError, match="folder name"):
        task_registry.__wrapped__(tmp_path / "x")


def test_a_new_task_file_runs_with_no_code_change(tmp_path: Path) -> None:
    new = {
        **GOOD,
        "id": "transport_eggs_pan_v0",
        "goal": ["all: inside(Egg, Pan)"],
        "instructions": {**GOOD["instructions"], "types": "Put the eggs in the pan."},
    }
    _write(tmp_path, new)
    tasks = task_registry.__wrapped__(tmp_path)
    env = make_env(tasks["transport_eggs_pan_v0"], n_agents=2, seed=3)
    env.reset()
    assert env.task.id == "transport_eggs_pan_v0"
    assert [a.predicate for a in env.episode.checklist] == ["inside"]
    obs, *_ = env.step({"agent_0": "explore", "agent_1": "wait"})
    assert "Put the eggs in the pan." in obs["agent_0"]["text"]


def test_unknown_task_ids_list_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known tasks are"):
        load_task("transport_nothing_v9")


def test_goal_clauses_parse_with_quantifiers_and_values() -> None:
    c = parse_clause("count>=2: isCooked(BreadSliced)")
    assert (c.quantifier, c.count, c.predicate, c.subject) == (
        "count",
        2,
        "isCooked",
        "BreadSliced",
    )
    c = parse_clause("any: isToggled(LightSwitch)=false")
    assert c.quantifier == "any" and c.value is False
    assert parse_clause("all: on(Mug, CoffeeMachine)").predicate == "inside"
    with pytest.raises(GoalError, match="liquid"):
        parse_clause("any: filledWith(Mug, juice)")
    with pytest.raises(GoalError, match="@home"):
        parse_clause("all: isOpen(@home)")
    with pytest.raises(GoalError, match="needs 'all'"):
        parse_clause("any: inside(Mug, @home)")
    assert (
        parse_clause("count>=2: on(Mug, Table)=false").text == "count>=2: inside(Mug, Table)=false"
    )
