"""The skill vocabulary: the one declaration that task files (capability profiles), the action
grammar, the environment, the metrics, the decomposer and the agents all read.

* ``PRIMITIVE_OF``: object skills that take one tick and issue one AI2-THOR action (the
  ``primitive`` action level's vocabulary), with that action; ``SKILL_OF_PRIMITIVE`` is its
  inverse, so primitive-level actions count as the same subtask types in the metrics.
* ``JOINT_SKILLS``: object skills that need several agents in the same tick (``lift``).
* ``OBJECT_SKILLS``: every skill that acts on the object it names.
* ``TARGETED_SKILLS``: skills that take an objectId (``navigate`` and the object skills);
  ``PLAIN_SKILLS`` take none; ``SKILLS`` is both, in the grammar's order.
* ``PLAN_SKILLS``: the skills a decomposition's subtasks may use (one agent, one object).
"""

PRIMITIVE_OF = {
    "pickup": "PickupObject",
    "put": "PutObject",
    "open": "OpenObject",
    "close": "CloseObject",
    "toggle_on": "ToggleObjectOn",
    "toggle_off": "ToggleObjectOff",
    "slice": "SliceObject",
}
SKILL_OF_PRIMITIVE = {action: skill for skill, action in PRIMITIVE_OF.items()}
JOINT_SKILLS = ("lift",)
OBJECT_SKILLS = (*PRIMITIVE_OF, *JOINT_SKILLS)
TARGETED_SKILLS = ("navigate", *OBJECT_SKILLS)
PLAIN_SKILLS = ("explore", "wait", "done")
SKILLS = TARGETED_SKILLS + PLAIN_SKILLS
# A joint skill needs a partner the plan does not schedule, so plans use single-agent skills.
PLAN_SKILLS = tuple(PRIMITIVE_OF)
