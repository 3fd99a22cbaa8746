"""Skills run over ticks: each tick a running skill issues one primitive simulator action.

:mod:`~benchmark.env.skills.base` holds the skill and the failure reasons,
:mod:`~benchmark.env.skills.walking` the skills that walk (``navigate``, ``explore``), and
:mod:`~benchmark.env.skills.build` turns action text into skills. Object skills take one tick.
"""

from benchmark.env.skills.base import (
    Skill,
    SkillFailure,
    is_permanent,
)
from benchmark.env.skills.build import (
    SightPoses,
    SkillContext,
    agent_contexts,
    build_skill,
    parse_decision,
    tick_actions,
)
from benchmark.env.skills.walking import Explore, Navigate

__all__ = [
    "Explore",
    "Navigate",
    "SightPoses",
    "Skill",
    "SkillContext",
    "SkillFailure",
    "agent_contexts",
    "build_skill",
    "is_permanent",
    "parse_decision",
    "tick_actions",
]
