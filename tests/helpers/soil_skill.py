"""A skill declared in one file, as a plugin would: ``soil`` makes an object dirty, the state no
built-in skill brings about (only the primitive ``DirtyObject`` does). Registering it is all
``tests/test_skills.py`` does to add it to the grammar, the environment, the prompts, the
planner, the goal routes, the metrics and LLaMAR's action log."""

from benchmark.skills import SkillSpec

SOIL = SkillSpec(
    "soil",
    "make the object dirty",
    llamar="DirtyObject",
    target="object",
    primitive="DirtyObject",
    effects=(("isDirty", True),),
    capability="dirtyable",
    plannable=True,
)
