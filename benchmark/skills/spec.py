"""What a skill is: :class:`SkillSpec`, one declared object per skill.

A skill is what an agent names at the skill action level (``pickup Apple|...``). Its spec says
everything the rest of the benchmark derives from it: whether it takes an objectId (and of
what kind, for the prompts), how it runs (one AI2-THOR primitive in one tick, walking, a joint
lift, or nothing), the goal predicates it changes, whether a decomposition's subtask may use it,
and the action LLaMAR's checkers log for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TARGETS = ("object", "receptacle")  # what a targeted skill's objectId names
MOTIONS = ("to_target", "explore")  # the walking skills the environment runs
JOINT_PRIMITIVE = "PickupObject"  # the one joint rule: agents lifting one object together
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class SkillError(ValueError):
    """A skill declaration that cannot be run, or a name no skill has."""


@dataclass(frozen=True)
class SkillSpec:
    """One skill.

    Attributes:
        name: the word agents use (lower case, ``[a-z][a-z0-9_]*``).
        summary: what it does, in one line.
        target: ``object`` or ``receptacle``: it takes an objectId naming one (put names the
            receptacle it puts into); None: it takes no argument.
        primitive: the AI2-THOR action it issues on its target, in one tick (the simulator
            refuses a name it does not know when the skill runs); for a joint skill the action
            the joint rule issues for the agent that ends up holding the object.
        joint: it needs several agents acting on the same object in the same tick (the joint
            lift of a heavy object, ``benchmark.env.traffic.joint_lifts``).
        motion: ``to_target`` (walk until the target is in view) or ``explore`` (walk towards
            unvisited places): skills the environment runs over several ticks.
        effects: the goal atoms ``(predicate, value)`` it brings about on its target.
        side_effects: those it brings about on what its target holds, through the simulator's
            state rules (switching on a microwave cooks what is inside).
        capability: the object capability (``ObjectSpec`` flag) its target needs.
        plannable: a decomposition's subtask may use it (one agent, one object).
        llamar: the action LLaMAR's logs name for it (``benchmark.metrics.llamar``).
    """

    name: str
    summary: str
    llamar: str
    target: str | None = None
    primitive: str | None = None
    joint: bool = False
    motion: str | None = None
    effects: tuple[tuple[str, bool], ...] = ()
    side_effects: tuple[tuple[str, bool], ...] = ()
    capability: str | None = None
    plannable: bool = False

    def __post_init__(self) -> None:
        where = f"skill {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise SkillError(f"{where}: a name is lower case letters, digits and '_'")
        if self.target is not None and self.target not in TARGETS:
            raise SkillError(f"{where}: target={self.target!r}; one of {TARGETS} or None")
        if self.motion is not None and self.motion not in MOTIONS:
            raise SkillError(f"{where}: motion={self.motion!r}; one of {MOTIONS} or None")
        if self.primitive is not None and self.motion is not None:
            raise SkillError(f"{where}: a skill either walks or issues a primitive, not both")
        if self.primitive is not None and self.target is None:
            raise SkillError(f"{where}: a skill that issues a primitive needs a target")
        if self.joint and self.primitive != JOINT_PRIMITIVE:
            raise SkillError(
                f"{where}: the simulator's one joint rule lifts an object together, so a joint "
                f"skill issues {JOINT_PRIMITIVE}"
            )
        if self.motion == "to_target" and self.target is None:
            raise SkillError(f"{where}: walking to a target needs a target")
        if self.motion == "explore" and self.target is not None:
            raise SkillError(f"{where}: exploring takes no target")
        if (self.effects or self.side_effects or self.capability) and self.target is None:
            raise SkillError(f"{where}: effects and capabilities are those of a target")
        if self.plannable and (self.primitive is None or self.joint):
            raise SkillError(
                f"{where}: a plan's subtask is one agent acting on one object with a primitive"
            )

    @property
    def targeted(self) -> bool:
        """It takes an objectId."""
        return self.target is not None

    @property
    def acts_on_object(self) -> bool:
        """It acts on the object it names (not only walks to it): the subtask types of the
        metrics."""
        return self.primitive is not None
