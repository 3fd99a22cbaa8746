"""Rules that settle what several agents do in the same tick.

* joint lifts: a heavy object is picked up only when two agents that see it, hands empty,
  ``lift`` it in the same tick; the one earliest in the tick's order then holds it;
* courtesy: an idle or exploring agent standing on the cell a navigating agent waits for steps
  aside (and so does the higher index of two agents blocking each other head-on);
* right of way: of two agents stepping into one cell, a navigating agent goes before one that
  explores or steps aside (exploring is never urgent); between two of the same kind, the lower
  index goes.

Navigating first matters: were an explorer with the lower index to win a cell a navigating agent
also steps into, the courtesy rule would push it back out on the next tick, its walk would lead
it into the same cell again, and the two would trade that cell for the rest of the episode.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from benchmark.env.skills import Navigate, Skill, SkillFailure
from benchmark.sim.failures import Failure
from benchmark.sim.world import World


def step_aside(
    world: World,
    skills: Sequence[Skill | None],
    finished: Sequence[bool],
    primitives: list[dict | None],
) -> set[int]:
    """Courtesy rule: an agent standing on the cell a navigating agent waits for moves to a
    free neighbouring cell when it is idle or exploring (waiting, done, exploring, or its
    action was rejected), or when the two block each other head-on and it has the higher
    index. ``skills`` and ``finished`` are per agent; ``primitives`` is this tick's actions.
    Returns the agents told to step aside."""
    aside: set[int] = set()
    for k, skill in enumerate(skills):
        wanted = getattr(skill, "wanted", None)
        if wanted is None or skill.finished:
            continue
        other = world.occupied.get(wanted, -1)
        if other < 0 or other == k:
            continue
        their = skills[other]
        idle = (
            finished[other]
            or their is None
            or their.name in ("wait", "done", "explore")
            or their.rejected
        )
        head_on = (
            isinstance(their, Navigate)
            and not their.finished
            and their.wanted == (world.agents[k].i, world.agents[k].j)
        )
        if not (idle or (head_on and other > k)):
            continue
        me = world.agents[k]
        o = world.agents[other]
        spots = [
            (o.i + di, o.j + dj)
            for di, dj in ((1, 0), (-1, 0), (0, 1), (0, -1))
            if (o.i + di, o.j + dj) in world.scene.reachable_set
            and (o.i + di, o.j + dj) not in world.occupied
        ]
        if not spots:
            continue
        ti, tj = max(spots, key=lambda c: (abs(c[0] - me.i) + abs(c[1] - me.j), c))
        primitives[other] = {"action": "Teleport", "position": {"x": ti * 0.25, "z": tj * 0.25}}
        aside.add(other)
    return aside


def right_of_way(
    skills: Sequence[Skill | None], primitives: list[dict | None], aside: Collection[int]
) -> list[int]:
    """Agents stepping into the same cell in one tick: a navigating agent goes before the
    others (explorers, and the agents in ``aside`` that step aside for someone), then the lower
    index; the rest wait (their walking skills count a blocked tick). Returns the agents held
    back, in index order, whose moves the trace records as failed (collisions)."""

    def urgent(k: int) -> bool:
        return isinstance(skills[k], Navigate) and k not in aside

    taken: set[tuple[float, float]] = set()
    held_back = []
    for k in sorted(range(len(primitives)), key=lambda k: (not urgent(k), k)):
        act = primitives[k]
        if act is None or act.get("action") != "Teleport" or "position" not in act:
            continue
        cell = (act["position"]["x"], act["position"]["z"])
        if cell in taken:
            primitives[k] = None
            held_back.append(k)
        taken.add(cell)
    return sorted(held_back)


def joint_lifts(
    world: World,
    heavy: frozenset[int],
    lifters: dict[int, list[int]],
    primitives: list[dict | None],
) -> dict[int, tuple[str, str]]:
    """Resolve this tick's ``lift`` skills (``lifters``: object index -> agents lifting it);
    returns (reason, feedback) per failed lifter and sets the pickup of the one that lifts."""
    failures: dict[int, tuple[str, str]] = {}
    for index, agents in lifters.items():
        oid = world.specs[index].object_id
        ready = [k for k in agents if world.visible(k, index) and world.agents[k].held < 0]
        for k in set(agents) - set(ready):
            reason = Failure.HANDS_FULL if world.agents[k].held >= 0 else Failure.NOT_VISIBLE
            failures[k] = (reason, f"lift {oid} failed: it must be in view and your hands empty")
        if index in heavy and len(ready) < 2:
            for k in ready:
                failures[k] = (
                    SkillFailure.NEEDS_PARTNER,
                    f"lift {oid} failed: it needs a second agent lifting in the same tick",
                )
            continue
        if ready:
            order = sorted(ready, key=lambda k: (k - world.tick) % len(world.agents))
            primitives[order[0]] = {"action": "PickupObject", "objectId": oid}
    return failures
