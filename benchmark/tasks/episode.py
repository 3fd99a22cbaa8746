"""Episodes: (task, scene, number of agents, seed) fully determine the initial state.

The seed drives one ``np.random.Generator`` for the episode: which scene (when not given), where
pickupable objects are re-placed, what is hidden, and where the agents start.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from benchmark.sim import Controller
from benchmark.sim.arrange import (
    place_at_points,
    randomize,
    reachable_by_sight,
    relocate,
    set_state,
    switch_on,
)
from benchmark.sim.world import World
from benchmark.tasks.goal_rules import check_clause
from benchmark.tasks.goals import HOME, Atom, GoalError, ground_clauses, holds
from benchmark.tasks.spec import TaskSpec

MAX_LAYOUT_TRIES = 8


@dataclass
class Episode:
    """A ready-to-run episode: the simulator in its initial state and the grounded checklist.

    ``homes`` maps the objects of the goal's ``inside(X, @home)`` clauses (value true) to the
    receptacles they rest in in the recorded scene (objectIds): the goal configuration that
    observations show (:mod:`benchmark.env.homes`).
    """

    task: TaskSpec
    scene: str
    n_agents: int
    seed: int
    controller: Controller
    checklist: list[Atom]
    instructions: dict[str, str]
    heavy: frozenset[int]
    homes: dict[str, str] = field(default_factory=dict)

    @property
    def world(self) -> World:
        return self.controller.world


def episode_rng(task_id: str, scene: str, n_agents: int, seed: int) -> np.random.Generator:
    """The episode's generator; stable across processes and Python versions."""
    return np.random.default_rng(
        [seed, zlib.crc32(task_id.encode()), zlib.crc32(scene.encode()), n_agents]
    )


def pick_scene(task: TaskSpec, seed: int, split: str | None = None) -> str:
    """A scene from the task's eligible set, chosen by ``seed``."""
    eligible = task.eligible_scenes(split)
    if not eligible:
        raise ValueError(f"task {task.id} has no eligible scene in split {split!r}")
    return eligible[
        int(np.random.default_rng([seed, zlib.crc32(task.id.encode())]).integers(len(eligible)))
    ]


def _arrange(task: TaskSpec, world: World, rng: np.random.Generator) -> None:
    """Apply the task's set-up in the order :class:`~benchmark.tasks.spec.Setup` documents."""
    setup = task.setup
    if setup.randomize:
        randomize(world, rng)
    placements = setup.place.get(world.scene.name, ())
    problem = place_at_points(world, [(p.object, p.position) for p in placements])
    if problem is not None:
        raise GoalError(f"setup.place.{world.scene.name}: {problem}")
    set_state(world, setup.open, "openable", is_open=True, openness=1.0)
    for spec in world.specs:
        k = spec.index
        if spec.object_type in setup.hide and world.objs[k].active:
            if not relocate(world, k, rng, closed_only=True):
                raise GoalError(
                    f"{world.scene.name} has no closed receptacle to hide {spec.object_id} in"
                )
        elif spec.object_type in setup.displace:
            home = world.scene.initial[k].parent
            if world.objs[k].parent == home:
                relocate(world, k, rng, avoid={home})
    set_state(world, setup.dirty, "dirtyable", is_dirty=True)
    switch_on(world, setup.switch_on)


def render_instructions(task: TaskSpec, atoms: list[Atom]) -> dict[str, str]:
    """The three phrasings; the explicit one names the grounded objects."""
    subjects = list(dict.fromkeys(a.subject for a in atoms))
    targets = list(dict.fromkeys(a.target for a in atoms if a.target))
    values = {"subjects": ", ".join(subjects), "targets": ", ".join(targets) or "place"}
    return {level: text.format(**values) for level, text in task.instructions.items()}


def check_episode_args(
    task: TaskSpec, scene: str | None, n_agents: int, strict_agents: bool = True
) -> None:
    """A ValueError naming what is wrong when ``task`` cannot be played by ``n_agents`` agents
    or in ``scene`` (checked before anything is built)."""
    if strict_agents and not task.min_agents <= n_agents <= task.max_agents:
        raise ValueError(
            f"task {task.id} takes {task.min_agents}-{task.max_agents} agents, "
            f"got n_agents={n_agents}"
        )
    if scene is not None and scene not in task.candidate_scenes():
        raise ValueError(f"scene {scene!r} is not among task {task.id}'s scenes")


def make_episode(
    task: TaskSpec,
    scene: str | None,
    n_agents: int,
    seed: int,
    split: str | None = None,
    strict_agents: bool = True,
) -> Episode:
    """Build the episode. With ``scene=None`` the scene is chosen by seed among the eligible
    ones, moving on to the next if the goal cannot be grounded in it (nothing reachable to act
    on) or can never be satisfied there (:func:`benchmark.tasks.goal_rules.check_clause`); errors
    name the task file, the clause and the rule. ``strict_agents=False`` allows agent counts
    outside the task's range (for showing, e.g., that a heavy-lift task cannot be done
    alone)."""
    check_episode_args(task, scene, n_agents, strict_agents)
    name = f"task {task.id} ({task.path})"
    if scene is not None:
        try:
            return _build(task, scene, n_agents, seed)
        except GoalError as err:
            raise ValueError(f"{name} cannot be set up in {scene}: {err}") from err
    eligible = task.eligible_scenes(split)
    if not eligible:
        raise ValueError(f"task {task.id} has no eligible scene in split {split!r}")
    first = pick_scene(task, seed, split)
    order = eligible[eligible.index(first) :] + eligible[: eligible.index(first)]
    reasons: list[str] = []
    for candidate in order:
        try:
            return _build(task, candidate, n_agents, seed)
        except GoalError as err:
            reasons.append(str(err))
    shown = "; ".join(list(dict.fromkeys(reasons))[:3])
    raise ValueError(f"{name} cannot be set up in any eligible scene: {shown}")


def _build(task: TaskSpec, scene: str, n_agents: int, seed: int) -> Episode:
    rng = episode_rng(task.id, scene, n_agents, seed)
    for _ in range(MAX_LAYOUT_TRIES):
        controller = Controller(scene=scene, agentCount=n_agents, seed=int(rng.integers(2**31)))
        world = controller.world
        homes = {
            s.object_id: world.specs[p].object_id
            for s, p in ((s, world.objs[s.index].parent) for s in world.specs)
            if p >= 0
        }
        _arrange(task, world, rng)
        for kind in task.requires:
            if not any(
                s.object_type == kind and reachable_by_sight(world, s.index) for s in world.specs
            ):
                raise GoalError(f"no reachable {kind} in {scene}")
        goal = task.goal_for(scene)
        groups = ground_clauses(
            list(goal), world, homes, lambda k, w=world: reachable_by_sight(w, k)
        )
        atoms = [a for group in groups for a in group]
        if not all(holds(world, a) for a in atoms):
            break
    for clause, group in zip(goal, groups, strict=True):
        check_clause(world, clause, group, lambda k, w=world: reachable_by_sight(w, k))
    heavy = frozenset(s.index for s in world.specs if s.object_type in task.setup.heavy)
    goal_homes = {
        a.subject: a.target
        for clause, group in zip(goal, groups, strict=True)
        if clause.target == HOME and clause.value
        for a in group
        if a.target is not None
    }
    return Episode(
        task,
        scene,
        n_agents,
        seed,
        controller,
        atoms,
        render_instructions(task, atoms),
        heavy,
        goal_homes,
    )
