"""The built-in skills, declared in the grammar's order. Adding a skill is one declaration
here (or one :func:`~benchmark.skills.registry.register_skill` call in a plugin's own file).

One-tick object skills issue one AI2-THOR action on their target; ``lift`` is the joint pickup
of a heavy object (two agents in the same tick); ``navigate`` and ``explore`` walk; ``wait``
and ``done`` do nothing (``done`` also ends the agent's part of the episode).
"""

from __future__ import annotations

from benchmark.skills.registry import register_skill
from benchmark.skills.spec import SkillSpec

# Switching an appliance on changes what it holds (benchmark.sim.state_changes.settle): a heat
# source cooks it, running water washes and fills it, a coffee machine fills it.
_SWITCHING_ON = (
    ("isCooked", True),
    ("isDirty", False),
    ("isFilledWithLiquid", True),
    ("filledWith", True),
)

BUILT_IN = (
    SkillSpec(
        "navigate",
        "walk until the object is in view and within reach",
        llamar="NavigateTo",
        target="object",
        motion="to_target",
    ),
    SkillSpec(
        "pickup",
        "pick the object up (hands empty, not heavy)",
        llamar="PickupObject",
        target="object",
        primitive="PickupObject",
        effects=(("inside", False),),
        capability="pickupable",
        plannable=True,
    ),
    SkillSpec(
        "put",
        "put what the agent holds in or on the receptacle",
        llamar="PutObject",
        target="receptacle",
        primitive="PutObject",
        effects=(("inside", True),),
        capability="receptacle",
        plannable=True,
    ),
    SkillSpec(
        "open",
        "open the object",
        llamar="OpenObject",
        target="object",
        primitive="OpenObject",
        effects=(("isOpen", True),),
        capability="openable",
        plannable=True,
    ),
    SkillSpec(
        "close",
        "close the object",
        llamar="CloseObject",
        target="object",
        primitive="CloseObject",
        effects=(("isOpen", False),),
        capability="openable",
        plannable=True,
    ),
    SkillSpec(
        "toggle_on",
        "switch the object on",
        llamar="ToggleObjectOn",
        target="object",
        primitive="ToggleObjectOn",
        effects=(("isToggled", True),),
        side_effects=_SWITCHING_ON,
        capability="toggleable",
        plannable=True,
    ),
    SkillSpec(
        "toggle_off",
        "switch the object off",
        llamar="ToggleObjectOff",
        target="object",
        primitive="ToggleObjectOff",
        effects=(("isToggled", False),),
        capability="toggleable",
        plannable=True,
    ),
    SkillSpec(
        "slice",
        "slice the object (holding a knife)",
        llamar="SliceObject",
        target="object",
        primitive="SliceObject",
        effects=(("isSliced", True),),
        capability="sliceable",
        plannable=True,
    ),
    SkillSpec(
        "lift",
        "lift a heavy object together with a second agent in the same tick",
        llamar="PickupObject",
        target="object",
        primitive="PickupObject",
        joint=True,
        effects=(("inside", False),),
        capability="pickupable",
    ),
    SkillSpec(
        "explore",
        "walk towards places not visited yet",
        llamar="Explore",
        motion="explore",
    ),
    SkillSpec("wait", "do nothing this tick", llamar="Idle"),
    SkillSpec("done", "end this agent's part of the episode", llamar="Done"),
)

for _spec in BUILT_IN:
    register_skill(_spec)
