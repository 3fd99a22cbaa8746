"""Starting skills: an agent's action text becomes the skill it runs, or a rejected skill that
says why it cannot run; and each tick, the primitive actions of the running skills."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from benchmark.env.grammar import Call, ParseError, parse_action
from benchmark.env.skills.base import Skill, SkillFailure
from benchmark.env.skills.walking import Explore, Navigate
from benchmark.sim.failures import Failure
from benchmark.sim.planning import Pose, sight_poses
from benchmark.sim.world import World
from benchmark.skills import is_joint
from benchmark.skills import skill as skill_spec


@dataclass(frozen=True)
class SkillContext:
    """What deciding whether a skill can start needs to know about one agent.

    Attributes:
        world: the simulation state.
        agent, name: the agent's index and name.
        level: the action level, ``skill`` or ``primitive``.
        profile, cannot: the agent's capability profile and the skills it forbids.
        known: the objectIds the agent knows (None under full observability: all of them).
        heavy: indices of the objects only a joint lift picks up.
        visited: the cells the agent has stood on (explore heads elsewhere).
        sight_poses: object index -> the poses that see it now.
    """

    world: World
    agent: int
    name: str
    level: str
    profile: str
    cannot: frozenset[str]
    known: set[str] | None
    heavy: frozenset[int]
    visited: set[tuple[int, int]]
    sight_poses: Callable[[int], list[Pose]]


def agent_contexts(
    world: World,
    agents: list[str],
    level: str,
    capabilities: list[tuple[str, frozenset[str]]],
    known: list[set[str]] | None,
    heavy: frozenset[int],
    visited: list[set[tuple[int, int]]],
) -> list[SkillContext]:
    """One context per agent for an episode; ``capabilities`` are (profile, forbidden skills)
    per agent, ``known`` None under full observability. The sets stay live."""
    poses = SightPoses(world)
    return [
        SkillContext(
            world=world,
            agent=k,
            name=name,
            level=level,
            profile=capabilities[k][0],
            cannot=capabilities[k][1],
            known=None if known is None else known[k],
            heavy=heavy,
            visited=visited[k],
            sight_poses=poses,
        )
        for k, name in enumerate(agents)
    ]


class SightPoses:
    """Object index -> the poses that see it where it is now (cached per object position)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.cache: dict[tuple, list[Pose]] = {}

    def __call__(self, index: int) -> list[Pose]:
        key = (index, self.world.box(index))
        if key not in self.cache:
            self.cache[key] = sight_poses(self.world, index)
        return self.cache[key]


def build_skill(call: Call, ctx: SkillContext) -> Skill:
    """The skill ``call`` starts, or a rejected skill whose feedback and reason say why it
    cannot start."""
    name, target = call.name, call.target
    if ctx.level == "primitive":
        return _primitive_skill(call, ctx)
    if name in ctx.cannot:
        return Skill(name, target).reject(
            SkillFailure.NOT_ALLOWED, f"{ctx.name} ({ctx.profile}) cannot {name}"
        )
    spec = skill_spec(name)
    if spec.motion == "explore":
        return Explore(name, visited=ctx.visited)
    if not spec.targeted:
        return Skill(name)
    world = ctx.world
    index = world.index_of.get(target or "", -1)
    if index < 0:
        return Skill(name, target).reject(Failure.UNKNOWN_OBJECT, f"there is no object {target!r}")
    if not world.objs[index].active:
        return Skill(name, target).reject(Failure.GONE, f"{target} is no longer in the scene")
    if ctx.known is not None and target not in ctx.known:
        return Skill(name, target).reject(
            SkillFailure.NOT_KNOWN, f"you do not know where {target} is yet"
        )
    if spec.motion == "to_target":
        poses = ctx.sight_poses(index)
        if not poses:
            return Skill(name, target).reject(
                SkillFailure.NO_VIEWPOINT, f"{target} cannot be seen from anywhere now"
            )
        return Navigate(name, target, poses=poses)
    if spec.joint:
        return Skill(name, target)
    if spec.primitive == "PickupObject" and index in ctx.heavy:
        return Skill(name, target).reject(
            SkillFailure.TOO_HEAVY, f"{target} is too heavy: two agents must lift it together"
        )
    if spec.primitive is None:
        return Skill(name, target)
    return Skill(name, target, primitive={"action": spec.primitive, "objectId": target})


def _primitive_skill(call: Call, ctx: SkillContext) -> Skill:
    if call.name in ("done", "wait"):
        return Skill(call.name)
    act: dict = {"action": call.name}
    if call.target is None:
        return Skill(call.name, primitive=act)
    act["objectId"] = call.target
    skill = Skill(call.name, call.target, primitive=act)
    if call.name == "PickupObject" and ctx.world.index_of.get(call.target, -1) in ctx.heavy:
        skill.reject(SkillFailure.TOO_HEAVY, f"{call.target} is too heavy to pick up alone")
    return skill


def parse_decision(
    text: object, level: str, recipient_problem: Callable[[str], str | None]
) -> tuple[Call | None, Skill | None]:
    """Parse an agent's action text: (call, None), or (None, a rejected skill saying why it
    cannot be run: unparseable text, or a message to an unknown recipient or oneself)."""
    try:
        call = parse_action(text, level)
    except ParseError as err:
        return None, Skill("invalid").reject(
            SkillFailure.UNPARSEABLE, f"could not parse action: {err}"
        )
    problem = None if call.say is None else recipient_problem(call.say.to)
    if problem is not None:
        return None, Skill("invalid").reject(SkillFailure.BAD_RECIPIENT, problem)
    return call, None


def tick_actions(
    world: World, skills: list[Skill | None], finished: list[bool]
) -> tuple[list[dict | None], dict[int, list[int]]]:
    """Each running skill's primitive action this tick (None: stand still), and the agents
    lifting each object (object index -> agents), for the joint-lift rule."""
    primitives: list[dict | None] = [None] * len(skills)
    lifters: dict[int, list[int]] = {}
    walking = frozenset(
        k
        for k, s in enumerate(skills)
        if isinstance(s, Navigate | Explore) and not s.finished and not finished[k]
    )
    for k, skill in enumerate(skills):
        if isinstance(skill, Navigate):
            skill.walking = walking
        if skill is None or skill.finished or finished[k] or skill.delay > 0 or skill.rejected:
            continue
        if is_joint(skill.name):
            lifters.setdefault(world.index_of[skill.target], []).append(k)
            continue
        primitives[k] = skill.next_action(world, k)
    return primitives, lifters
