"""The goal configuration that observations show in rearrangement episodes.

A rearrangement goal (``all: inside(Apple, @home)``) asks for every object back in the
receptacle it rests in in the recorded scene. As in AI2-THOR's one-phase rearrangement, where
the agent sees the goal configuration from its current pose, the observation of an episode
whose goal has such a clause marks each visible receptacle with the goal objects that belong
in it but are elsewhere now (its ``belongs`` field). It is read from the simulator state (the
recorded home against where the object is now), never from the checklist. Tasks without such
a clause show nothing of it, so their observations do not change.
"""

from __future__ import annotations

from collections.abc import Mapping

from benchmark.sim.world import World
from benchmark.tasks.goals import HOME
from benchmark.tasks.spec import TaskSpec


def shows_homes(task: TaskSpec) -> bool:
    """Whether ``task``'s observations carry ``belongs``: the goal of some floor plan has an
    ``inside(X, @home)`` clause with value true. Decided per task, so that an environment's
    observation space never changes between episodes."""
    clauses = list(task.goal) + [c for extra in task.scene_goals.values() for c in extra]
    return any(c.predicate == "inside" and c.target == HOME and c.value for c in clauses)


def misplaced(world: World, homes: Mapping[str, str]) -> dict[int, tuple[str, ...]]:
    """Home receptacle index -> the objectIds (sorted) of the objects whose recorded home
    (``homes``: objectId -> receptacle objectId) it is and that are not in it now: resting
    elsewhere, directly or nested, or carried by an agent. Objects no longer in the scene (a
    sliced apple) are left out: nothing can bring them back."""
    out: dict[int, list[str]] = {}
    for oid, home in homes.items():
        k, h = world.index_of.get(oid, -1), world.index_of.get(home, -1)
        if k < 0 or h < 0 or not world.objs[k].active:
            continue
        if world.carrier(k) >= 0 or h not in world.ancestors(k):
            out.setdefault(h, []).append(oid)
    return {h: tuple(sorted(ids)) for h, ids in out.items()}
