"""The one skill vocabulary: what the grammar, the environment, the decomposer, the metrics and
the LLM agents' reply parser accept all comes from benchmark.skill_names."""

from __future__ import annotations

import pytest

from baselines.llm_agents.team import extract_action
from benchmark.env import make_env
from benchmark.env.grammar import ParseError, parse_action
from benchmark.sim.actions import ACTIONS
from benchmark.skill_names import (
    JOINT_SKILLS,
    OBJECT_SKILLS,
    PLAIN_SKILLS,
    PLAN_SKILLS,
    PRIMITIVE_OF,
    SKILL_OF_PRIMITIVE,
    SKILLS,
    TARGETED_SKILLS,
)
from benchmark.tasks.decompose import validate

APPLE = "Apple|-00.47|+01.15|+00.48"


def test_every_one_tick_skill_issues_a_real_thor_action_and_back() -> None:
    assert set(PRIMITIVE_OF.values()) <= set(ACTIONS)
    assert {SKILL_OF_PRIMITIVE[a]: a for a in PRIMITIVE_OF.values()} == PRIMITIVE_OF
    assert set(OBJECT_SKILLS) == set(PRIMITIVE_OF) | set(JOINT_SKILLS)
    assert set(TARGETED_SKILLS) == {"navigate", *OBJECT_SKILLS}
    assert len(set(SKILLS)) == len(SKILLS) and not set(TARGETED_SKILLS) & set(PLAIN_SKILLS)


def test_the_grammar_accepts_exactly_the_declared_skills() -> None:
    for skill in TARGETED_SKILLS:
        assert parse_action(f"{skill} {APPLE}").name == skill
        with pytest.raises(ParseError, match="needs an objectId"):
            parse_action(skill)
    for skill in PLAIN_SKILLS:
        assert parse_action(skill).target is None
    for action in PRIMITIVE_OF.values():
        assert parse_action(f"{action} {APPLE}", level="primitive").name == action
    with pytest.raises(ParseError, match="valid skills are " + ", ".join(SKILLS)):
        parse_action("fly")


def test_the_environment_runs_every_one_tick_skill_as_its_thor_action() -> None:
    env = make_env("switch_off_bedroom_v0", n_agents=1, seed=0, observability="full")
    env.reset(seed=0)
    target = next(o for o in env.world.specs if o.object_type == "LightSwitch").object_id
    for skill in PRIMITIVE_OF:
        env.step({"agent_0": f"{skill} {target}"})
    issued = [row[0][:3] for row in env.recorder.trace["ticks"]]
    assert [(a, s) for a, _, s in issued] == [(a, s) for s, a in PRIMITIVE_OF.items()]


def test_plans_use_exactly_the_plan_skills() -> None:
    assert set(PLAN_SKILLS) <= set(OBJECT_SKILLS) and not set(PLAN_SKILLS) & set(JOINT_SKILLS)
    items = [
        {"id": skill, "skill": skill, "target": APPLE, "after": [], "agent": "agent_0"}
        for skill in SKILLS
    ]
    plan = validate(items, {APPLE}, ["agent_0"], {})
    assert [s.skill for s in plan.subtasks] == list(PLAN_SKILLS)


def test_llm_replies_name_any_declared_skill_in_prose() -> None:
    seen = [APPLE, "Box|0|0|0"]
    for skill in TARGETED_SKILLS:
        assert extract_action(f"ok, I will {skill} the apple.", seen) == f"{skill} {APPLE}"
    for skill in PLAIN_SKILLS:
        assert extract_action(f"Let me {skill.upper()} now", seen) == skill
    assert extract_action("we lift the box together", seen) == "lift Box|0|0|0"
