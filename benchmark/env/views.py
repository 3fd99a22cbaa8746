"""What a team may know of an episode besides its observations.

Every team gets a :class:`TaskInfo` at reset: the public task information. Under full
observability it also holds a :class:`PrivilegedView`: the scoring state, read-only, for
privileged reference teams such as the oracle. The environment itself is never handed out, the
way Melting Pot keeps the substrate apart from what a scenario may see.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from benchmark.env.options import EnvOptions
from benchmark.sim.world import World, snapshot
from benchmark.tasks.goals import Atom
from benchmark.tasks.spec import TaskSpec


class PrivilegedView:
    """The scoring state of the running episode, read-only.

    Attributes:
        checklist: the grounded goal atoms, fixed for the episode.
        heavy: indices of the objects only a joint ``lift`` of two agents picks up.
        cannot: per agent index, the skills its capability profile forbids.

    :meth:`satisfied` and :meth:`world` give the live state at the current tick.
    """

    def __init__(
        self,
        checklist: tuple[Atom, ...],
        heavy: frozenset[int],
        cannot: tuple[frozenset[str], ...],
        satisfied: Callable[[], tuple[bool, ...]],
        world: Callable[[], World],
        tick: Callable[[], int],
    ) -> None:
        self._checklist, self._heavy, self._cannot = checklist, heavy, cannot
        self._satisfied, self._world, self._tick = satisfied, world, tick
        self._snapshot: tuple[int, World] | None = None

    @property
    def checklist(self) -> tuple[Atom, ...]:
        return self._checklist

    @property
    def heavy(self) -> frozenset[int]:
        return self._heavy

    @property
    def cannot(self) -> tuple[frozenset[str], ...]:
        return self._cannot

    def satisfied(self) -> tuple[bool, ...]:
        """Which checklist atoms hold now, in checklist order."""
        return self._satisfied()

    def world(self) -> World:
        """A snapshot of the simulator state now (one per tick): objects, agents, containment
        and the visibility queries. It is a copy; changing it changes nothing in the episode."""
        tick = self._tick()
        if self._snapshot is None or self._snapshot[0] != tick:
            self._snapshot = (tick, snapshot(self._world()))
        return self._snapshot[1]


@dataclass(frozen=True)
class TaskInfo:
    """The public information every team gets at reset.

    Attributes:
        task, family: the task id and its family.
        seed: the episode seed (a team that samples seeds its generator from it, so that its
            results never depend on which worker plays the episode).
        instruction: the instruction at the episode's ambiguity level.
        goal: the task's goal clauses as text (``all: inside(Apple, Fridge)``).
        agents: the agent names, ``agent_0`` ... ``agent_{n-1}``.
        cannot: agent name -> the skills its capability profile forbids (sorted).
        max_ticks, max_decisions: the episode's limits (decisions per agent).
        action_level, observability, comm: the environment options teams must respect.
        privileged: the scoring state, only under full observability.
        scene: the floor plan's name (public, as AI2-THOR's scene names are).
    """

    task: str
    family: str
    seed: int
    instruction: str
    goal: tuple[str, ...]
    agents: tuple[str, ...]
    cannot: Mapping[str, tuple[str, ...]]
    max_ticks: int
    max_decisions: int
    action_level: str
    observability: str
    comm: bool
    privileged: PrivilegedView | None = field(default=None, repr=False)
    scene: str | None = None

    @property
    def n_agents(self) -> int:
        return len(self.agents)


def task_info(
    task: TaskSpec,
    seed: int,
    options: EnvOptions,
    instruction: str,
    agents: list[str],
    privileged: PrivilegedView | None = None,
    scene: str | None = None,
) -> TaskInfo:
    """The :class:`TaskInfo` of an episode of ``task`` with this seed, options and agents;
    its goal is the task's goal on ``scene`` (with that floor plan's own clauses)."""
    return TaskInfo(
        task=task.id,
        family=task.family,
        seed=seed,
        instruction=instruction,
        goal=tuple(c.text for c in (task.goal if scene is None else task.goal_for(scene))),
        agents=tuple(agents),
        cannot={a: tuple(sorted(task.capability(k).cannot)) for k, a in enumerate(agents)},
        max_ticks=task.max_ticks,
        max_decisions=task.max_decisions,
        action_level=options.action_level,
        observability=options.observability,
        comm=options.comm,
        privileged=privileged,
        scene=scene,
    )
