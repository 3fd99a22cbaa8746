"""Skills as declared objects (benchmark/skills): the grammar, the environment, the decomposer,
the metrics, the prompts' skill lists, the goal routes and the LLM agents' reply parser all
derive from the declarations; a skill declared in one file (tests/helpers/soil_skill.py) and
registered reaches every one of them, and leaves with its registration."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.soil_skill import SOIL

from baselines.goal_routes import UnpursuableGoal, no_route
from baselines.llm_agents.team import LLMAgentsTeam, decision_schema, extract_action
from baselines.oracle import OracleTeam
from baselines.oracle.recipes import direct_skill
from benchmark.env import make_env
from benchmark.env.grammar import ParseError, parse_action
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode
from benchmark.sim.actions import ACTIONS
from benchmark.skills import (
    SkillError,
    SkillSpec,
    action_menu,
    all_skills,
    joint_skills,
    llamar_action,
    object_skills,
    plain_skills,
    plan_menu,
    plan_skills,
    primitive_of,
    register_skill,
    registered,
    skill_names,
    skill_of_primitive,
    targeted_skills,
)
from benchmark.tasks.decompose import build_prompt, validate
from benchmark.tasks.goal_rules import NEEDS

APPLE = "Apple|-00.47|+01.15|+00.48"
BUILT_IN = [
    "navigate",
    "pickup",
    "put",
    "open",
    "close",
    "toggle_on",
    "toggle_off",
    "slice",
    "lift",
    "explore",
    "wait",
    "done",
]


# ---------------------------------------------------------------------- the built-in skills
def test_the_built_in_skills_in_the_grammars_order() -> None:
    assert list(skill_names()) == BUILT_IN
    assert set(primitive_of().values()) <= set(ACTIONS)
    assert {skill_of_primitive(a): a for a in primitive_of().values()} == primitive_of()
    assert set(object_skills()) == set(primitive_of()) | set(joint_skills()) == {*BUILT_IN[1:9]}
    assert joint_skills() == ("lift",) and plain_skills() == ("explore", "wait", "done")
    assert set(targeted_skills()) == {"navigate", *object_skills()}
    assert plan_skills() == tuple(BUILT_IN[1:8])


def test_the_prompts_skill_lists_are_derived_and_read_as_before() -> None:
    assert action_menu() == (
        "navigate X | pickup X | put X | open X | close X | toggle_on X | toggle_off X | "
        "slice X | lift X | explore | wait | done"
    )
    assert plan_menu() == (
        "pickup <id>, put <receptacleId>, open <id>, close <id>, toggle_on <id>, "
        "toggle_off <id>, slice <id>"
    )


def test_a_skills_target_capability_is_the_one_the_goal_rules_name() -> None:
    """The goal rules (which object can have a predicate changed at all) and the skills that
    change it directly agree on the capability the object needs."""
    for spec in all_skills():
        for predicate, _ in spec.effects:
            if predicate in NEEDS and predicate != "inside":
                assert NEEDS[predicate][0] == spec.capability, spec.name


def test_the_states_no_built_in_skill_brings_about_say_so() -> None:
    assert "only the primitive DirtyObject" in no_route("isDirty", True, None)
    assert "for good" in no_route("isSliced", False, None)
    assert no_route("isCooked", True, None) is None  # switching a heat source on
    assert "wine" in no_route("filledWith", True, "wine")
    assert direct_skill("isOpen", False) == "close" and direct_skill("isCooked", True) is None


def test_the_grammar_accepts_exactly_the_declared_skills() -> None:
    for skill in targeted_skills():
        assert parse_action(f"{skill} {APPLE}").name == skill
        with pytest.raises(ParseError, match="needs an objectId"):
            parse_action(skill)
    for skill in plain_skills():
        assert parse_action(skill).target is None
    for action in primitive_of().values():
        assert parse_action(f"{action} {APPLE}", level="primitive").name == action
    with pytest.raises(ParseError, match="valid skills are " + ", ".join(skill_names())):
        parse_action("fly")


def test_the_environment_runs_every_one_tick_skill_as_its_thor_action() -> None:
    env = make_env("switch_off_bedroom_v0", n_agents=1, seed=0, observability="full")
    env.reset(seed=0)
    target = next(o for o in env.world.specs if o.object_type == "LightSwitch").object_id
    for skill in primitive_of():
        env.step({"agent_0": f"{skill} {target}"})
    issued = [row[0][:3] for row in env.recorder.trace["ticks"]]
    assert [(a, s) for a, _, s in issued] == [(a, s) for s, a in primitive_of().items()]


def test_plans_use_exactly_the_plan_skills() -> None:
    assert set(plan_skills()) <= set(object_skills()) and not set(plan_skills()) & set(
        joint_skills()
    )
    items = [
        {"id": skill, "skill": skill, "target": APPLE, "after": [], "agent": "agent_0"}
        for skill in skill_names()
    ]
    plan = validate(items, {APPLE}, ["agent_0"], {})
    assert [s.skill for s in plan.subtasks] == list(plan_skills())


def test_llm_replies_name_any_declared_skill_in_prose() -> None:
    seen = [APPLE, "Box|0|0|0"]
    for skill in targeted_skills():
        assert extract_action(f"ok, I will {skill} the apple.", seen) == f"{skill} {APPLE}"
    for skill in plain_skills():
        assert extract_action(f"Let me {skill.upper()} now", seen) == skill
    assert extract_action("we lift the box together", seen) == "lift Box|0|0|0"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"name": "Fly"}, "lower case"),
        ({"target": "room"}, "target='room'"),
        ({"target": None, "primitive": "OpenObject"}, "needs a target"),
        ({"joint": True, "primitive": "OpenObject"}, "joint skill issues PickupObject"),
        ({"motion": "to_target", "primitive": "OpenObject"}, "walks or issues a primitive"),
        ({"plannable": True, "primitive": None}, "one agent acting on one object"),
        ({"target": None, "effects": (("isOpen", True),)}, "those of a target"),
    ],
)
def test_a_declaration_that_cannot_run_is_refused_naming_why(fields: dict, says: str) -> None:
    base = {"name": "wipe", "summary": "wipe it", "llamar": "Wipe", "target": "object"}
    with pytest.raises(SkillError, match=says):
        SkillSpec(**{**base, **fields})


def test_a_taken_name_or_primitive_is_refused() -> None:
    with pytest.raises(SkillError, match="'open' is declared already"):
        register_skill(SkillSpec("open", "again", llamar="OpenObject", target="object"))
    twin = SkillSpec("unlock", "open", llamar="OpenObject", target="object", primitive="OpenObject")
    with pytest.raises(SkillError, match="'open' already issues OpenObject"):
        register_skill(twin)
    assert "unlock" not in skill_names()


# ---------------------------------------------------------------------- a skill added in one file
def _clean_dirtyable(env) -> str:
    world = env.world
    return next(
        s.object_id
        for s in world.specs
        if s.dirtyable and not world.objs[s.index].is_dirty and not world.enclosed(s.index)
    )


def test_a_skill_declared_in_one_file_reaches_every_part_once_registered() -> None:
    assert "soil" not in skill_names()
    with pytest.raises(ParseError, match="unknown skill 'soil'"):
        parse_action(f"soil {APPLE}")
    with registered(SOIL):
        # the grammar, the prompts' skill lists, the decision schema, the planner
        assert parse_action(f"soil {APPLE}").target == APPLE
        assert action_menu().endswith("done | soil X") and plan_menu().endswith("soil <id>")
        schema = decision_schema(skill_names(), ["Mug_1"], [])
        assert "soil Mug_1" in schema["properties"]["action"]["enum"]
        chat = build_prompt("Skills: {skills}.", "soil the mug", [APPLE], ["agent_0"], {})
        assert "soil <id>" in chat[0]["content"]
        plan = validate(
            [{"id": "s1", "skill": "soil", "target": APPLE, "after": [], "agent": "agent_0"}],
            {APPLE},
            ["agent_0"],
            {},
        )
        assert [s.skill for s in plan.subtasks] == ["soil"]
        # the goal routes, LLaMAR's actions, the metrics
        assert no_route("isDirty", True, None) is None and direct_skill("isDirty", True) == "soil"
        assert (
            llamar_action("soil") == "DirtyObject" and skill_of_primitive("DirtyObject") == "soil"
        )
        assert "soil" in object_skills()
        # the LLM agents' prompt and the environment, which runs it: the mug is dirty
        env = make_env("transport_apple_fridge_v0", n_agents=1, seed=3, observability="full")
        first, _ = env.reset(seed=3)
        team = LLMAgentsTeam(llm=None, prompt="llm_agents_v4")
        team.start(env.agents, env.task_info())
        team.observe("agent_0", first["agent_0"])
        system = team.chat("agent_0", first["agent_0"])[0]["content"]
        assert "| lift X | explore | wait | done | soil X (X: an object you know)" in system
        mug = _clean_dirtyable(env)
        obs, *_ = env.step({"agent_0": f"navigate {mug}"})
        while not obs["agent_0"]["needs_decision"]:
            obs, *_ = env.step({"agent_0": "wait"})
        obs, *_ = env.step({"agent_0": f"soil {mug}"})
        assert obs["agent_0"]["last_success"] == 1, obs["agent_0"]["feedback"]
        assert env.world.objs[env.world.index_of[mug]].is_dirty
        assert env.recorder.trace["ticks"][-1][0][0] == "DirtyObject"
    assert "soil" not in skill_names() and no_route("isDirty", True, None) is not None


def test_the_oracle_pursues_a_goal_only_the_added_skill_brings_about(tmp_path: Path) -> None:
    task = tmp_path / "soil_mugs_v0.yaml"
    task.write_text(
        "id: soil_mugs_v0\nfamily: prepare\ninstructions:\n"
        "  explicit: Make {subjects} dirty.\n  types: Make a mug dirty.\n"
        "  implicit: Make a mug dirty.\n"
        "scenes: {room_types: [kitchens]}\nagents: {min: 1, max: 2}\n"
        "limits: {ticks: 200, decisions: 80}\ngoal:\n- 'any: isDirty(Mug)'\n"
    )
    with registered(SOIL):
        env = make_env(str(task), n_agents=2, seed=0, observability="full")
        trace = run_episode(env, OracleTeam(), seed=0)
        used = [r["skill"] for r in trace["skills"] if r["success"]]
        assert "soil" in used
        metrics = episode_metrics(trace)
        assert metrics["SR"] == 1.0
    env = make_env(str(task), n_agents=2, seed=0, observability="full")
    with pytest.raises(UnpursuableGoal, match="no skill makes an object dirty"):
        run_episode(env, OracleTeam(), seed=0)
