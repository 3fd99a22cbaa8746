"""The skills agents use, each one declared object (:class:`SkillSpec`): the built-in ones in
:mod:`~benchmark.skills.catalog`, the queries everything else derives from them in
:mod:`~benchmark.skills.registry`. How the environment runs a skill is
:mod:`benchmark.env.skills`."""

from benchmark.skills import catalog as _catalog  # noqa: F401  (registers the built-in skills)
from benchmark.skills.registry import (
    action_menu,
    all_skills,
    is_joint,
    is_skill,
    is_targeted,
    joint_skills,
    llamar_action,
    object_skills,
    plain_skills,
    plan_menu,
    plan_skills,
    primitive_of,
    register_skill,
    registered,
    skill,
    skill_names,
    skill_of_primitive,
    skills_bringing_about,
    targeted_skills,
    unregister_skill,
)
from benchmark.skills.spec import SkillError, SkillSpec

__all__ = [
    "SkillError",
    "SkillSpec",
    "action_menu",
    "all_skills",
    "is_joint",
    "is_skill",
    "is_targeted",
    "joint_skills",
    "llamar_action",
    "object_skills",
    "plain_skills",
    "plan_menu",
    "plan_skills",
    "primitive_of",
    "register_skill",
    "registered",
    "skill",
    "skill_names",
    "skill_of_primitive",
    "skills_bringing_about",
    "targeted_skills",
    "unregister_skill",
]
