"""The skills there are, in the grammar's order, and what is derived from them.

Every part of the benchmark that names skills asks here: the action grammar
(:func:`skill_names`, :func:`is_targeted`), the environment (:func:`skill`), task files'
capability profiles, the decomposer (:func:`plan_skills`), the metrics
(:func:`object_skills`, :func:`skill_of_primitive`, :func:`llamar_action`), the prompts'
skill lists (:func:`action_menu`, :func:`plan_menu`) and the scripted teams' routes
(:func:`skills_bringing_about`). The built-in skills are declared in
:mod:`benchmark.skills.catalog`; :func:`register_skill` adds one (a plugin, or a test) and
everything derived follows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from benchmark.skills.spec import SkillError, SkillSpec

_SKILLS: dict[str, SkillSpec] = {}


def register_skill(spec: SkillSpec) -> SkillSpec:
    """Add ``spec`` after the skills declared so far; a name taken, or a primitive another
    one-tick skill already issues, is an error naming both."""
    if not isinstance(spec, SkillSpec):
        raise SkillError(f"register_skill needs a SkillSpec, got {type(spec).__name__}")
    if spec.name in _SKILLS:
        raise SkillError(f"skill {spec.name!r} is declared already")
    if spec.primitive is not None and not spec.joint:
        for other in _SKILLS.values():
            if other.primitive == spec.primitive and not other.joint:
                raise SkillError(
                    f"skill {spec.name!r}: {other.name!r} already issues {spec.primitive} (a "
                    "primitive maps back to one skill)"
                )
    _SKILLS[spec.name] = spec
    return spec


def unregister_skill(name: str) -> None:
    """Remove a registered skill (a test's, once it is done)."""
    skill(name)
    del _SKILLS[name]


@contextmanager
def registered(spec: SkillSpec) -> Iterator[SkillSpec]:
    """``spec`` registered for the duration of a ``with`` block."""
    register_skill(spec)
    try:
        yield spec
    finally:
        _SKILLS.pop(spec.name, None)


def skill(name: str) -> SkillSpec:
    """The spec of skill ``name``; an unknown name is an error listing the skills."""
    try:
        return _SKILLS[name]
    except KeyError:
        raise SkillError(f"unknown skill {name!r}; valid skills are {', '.join(_SKILLS)}") from None


def all_skills() -> tuple[SkillSpec, ...]:
    return tuple(_SKILLS.values())


def skill_names() -> tuple[str, ...]:
    """Every skill, in the grammar's order."""
    return tuple(_SKILLS)


def is_skill(name: str) -> bool:
    return name in _SKILLS


def is_targeted(name: str) -> bool:
    """Whether skill ``name`` takes an objectId (False for a name that is no skill)."""
    spec = _SKILLS.get(name)
    return spec is not None and spec.targeted


def is_joint(name: str) -> bool:
    """Whether ``name`` is a joint skill (False for a name that is no skill)."""
    spec = _SKILLS.get(name)
    return spec is not None and spec.joint


def targeted_skills() -> tuple[str, ...]:
    return tuple(s.name for s in _SKILLS.values() if s.targeted)


def plain_skills() -> tuple[str, ...]:
    """The skills that take no argument."""
    return tuple(s.name for s in _SKILLS.values() if not s.targeted)


def object_skills() -> tuple[str, ...]:
    """The skills that act on the object they name (one-tick and joint)."""
    return tuple(s.name for s in _SKILLS.values() if s.acts_on_object)


def joint_skills() -> tuple[str, ...]:
    return tuple(s.name for s in _SKILLS.values() if s.joint)


def plan_skills() -> tuple[str, ...]:
    """The skills a decomposition's subtasks may use (one agent, one object)."""
    return tuple(s.name for s in _SKILLS.values() if s.plannable)


def primitive_of() -> dict[str, str]:
    """One-tick object skill -> the AI2-THOR action it issues (the primitive level's
    vocabulary); joint skills are not in it."""
    return {s.name: s.primitive for s in _SKILLS.values() if s.primitive and not s.joint}


def skill_of_primitive(action: str) -> str:
    """The skill a primitive-level action counts as in the metrics (itself when none)."""
    for s in _SKILLS.values():
        if s.primitive == action and not s.joint:
            return s.name
    return action


def llamar_action(name: str) -> str | None:
    """The action LLaMAR's logs name for skill ``name`` (None for a name that is no skill)."""
    spec = _SKILLS.get(name)
    return None if spec is None else spec.llamar


def skills_bringing_about(predicate: str, value: bool, side_effects: bool = True) -> list[str]:
    """The skills that make ``predicate`` take ``value``: on their target (``effects``), and,
    with ``side_effects``, on what their target holds."""
    atom = (predicate, value)
    return [
        s.name
        for s in _SKILLS.values()
        if atom in s.effects or (side_effects and atom in s.side_effects)
    ]


def action_menu(names: tuple[str, ...] | None = None) -> str:
    """The skills as a prompt lists them: ``navigate X | pickup X | ... | done``."""
    specs = [skill(n) for n in names] if names is not None else all_skills()
    return " | ".join(f"{s.name} X" if s.targeted else s.name for s in specs)


def plan_menu() -> str:
    """The plan skills as the planner's prompt lists them: ``pickup <id>, put
    <receptacleId>, ...``."""
    arg = {"object": "<id>", "receptacle": "<receptacleId>"}
    return ", ".join(f"{s.name} {arg[s.target or 'object']}" for s in all_skills() if s.plannable)
