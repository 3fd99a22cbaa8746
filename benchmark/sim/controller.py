"""``Controller``: the embedded simulator behind AI2-THOR's ``Controller`` API.

Conflict rule for :meth:`Controller.multi_step`: within one tick the agents' actions resolve
one at a time in a rotating priority order. At tick ``t`` (counting every step and multi_step
since reset) agent ``t mod n`` goes first, then ``t+1 mod n``, and so on. Each action sees the
effects of the actions before it in that order: of two agents reaching for the same object the
earlier one gets it, a move into a cell that another agent leaves in the same tick succeeds only
if that agent moved earlier, and two agents can never swap cells through each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmark.sim.actions import INITIALIZE, ActionSpec, validate
from benchmark.sim.events import Event, MultiAgentEvent
from benchmark.sim.facts import object_facts
from benchmark.sim.initialize import (
    AGENT_DEFAULTS,
    CONSTRUCTOR_PARAMS,
    CONTROLLER_DEFAULTS,
    check_params,
    initialize_params,
)
from benchmark.sim.interaction import drop
from benchmark.sim.scene import load_scene
from benchmark.sim.world import OK, ActionResult, AgentState, World, restore, snapshot


def check_room(scene: str, cells: int, count: int) -> None:
    """Raise ValueError unless ``count`` agents fit on distinct cells of ``scene``, which has
    ``cells`` reachable cells (each agent stands on its own cell)."""
    if count > cells:
        raise ValueError(
            f"scene {scene} has {cells} reachable cells, too few for agentCount={count}: "
            "every agent needs a reachable cell of its own"
        )


def start_poses(
    scene: str, cells: Sequence[tuple[int, int]], count: int, seed: int
) -> list[AgentState]:
    """Distinct seeded start cells, from the free reachable ``cells`` of ``scene``, and
    headings on the 90-degree grid; ValueError naming the scene when there are too few."""
    check_room(scene, len(cells), count)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(cells), size=count, replace=False)
    headings = rng.integers(0, 4, size=count) * 90
    return [
        AgentState(*cells[c], rotation=int(h), horizon=0, standing=True, held=-1)
        for c, h in zip(chosen, headings, strict=True)
    ]


class Controller:
    """Embedded, AI2-THOR-compatible multi-agent simulator on the real iTHOR scenes.

    Args:
        scene: ``FloorPlanN`` or ``FloorPlanN_physics`` (the 120 iTHOR floor plans).
        agentCount: number of agents, 1..8 (:data:`~benchmark.sim.initialize.MAX_AGENTS`);
            the scene must have a reachable cell for each, else ValueError.
        gridSize: must be 0.25 (metres).
        visibilityDistance: how far an agent sees and reaches, metres.
        fieldOfView: horizontal and vertical field of view, degrees.
        rotateStepDegrees: how far RotateLeft/RotateRight turn without ``degrees``: 90, 180,
            270 or a multiple of 360 (AI2-THOR's rule under ``snapToGrid``).
        seed: chooses the agents' start cells and headings.
        width, height: reported screen size (no frames are rendered).
        cache_dir: asset cache directory (default: see :func:`benchmark.paths.cache_dir`).
        **thor: AI2-THOR's other initialisation parameters: ``snapToGrid`` (must be True),
            ``agentMode`` (must be ``"default"``), the render flags (``renderDepthImage``,
            ``renderInstanceSegmentation``, ``renderObjectImage``, ...) and the Unity launcher
            arguments (``quality``, ``headless``, ``x_display``, ...), accepted and ignored;
            see :mod:`benchmark.sim.initialize`. Unknown names raise ValueError.

    Scene set-up actions (``step`` only): ``Initialize`` re-creates the agents on the current
    scene with new parameters, objects untouched: the first agent keeps its pose, the others
    start at seeded free cells, held objects are set down; omitted parameters take AI2-THOR's
    defaults (``agentCount`` falls back to 1), and ``initialization_parameters`` (so
    ``reset``) keep the constructor's, as in AI2-THOR. ``InitialRandomSpawn``,
    ``PlaceObjectAtPoint`` and ``SetObjectPoses``: see :mod:`benchmark.sim.spawning` and
    :mod:`benchmark.sim.placing`. ``forceAction`` skips the sight checks (distance, view, line
    of sight, closed receptacle around the target) and, for PutObject, the compatibility table;
    never an unknown object or a capability rule.

    Differences from AI2-THOR:

    * agents stand on the 0.25 m grid. Headings are exact (any ``degrees``, any teleport
      yaw; metadata reports them as given, in [0, 360)); a move goes along the facing and ends
      on the nearest grid point (:mod:`benchmark.sim.navigation`);
    * objectIds never change: AI2-THOR renames objects after their new positions following
      InitialRandomSpawn and SetObjectPoses; here positions, boxes and ``parentReceptacles``
      change and the ids stay;
    * objects are boxes: object rotations are checked and not applied; a point is put on the
      receptacle box below or around it (:mod:`benchmark.sim.placing`);
    * copies (``numDuplicatesOfType`` above the count present, a name listed twice in
      SetObjectPoses), moving furniture and non-default agent bodies are refused with a clear
      message; a bad Initialize argument raises ValueError (AI2-THOR fails the action).

    Example:
        >>> c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
        >>> ev = c.step(action="RotateLeft", agentId=1)
        >>> ev.events[1].metadata["lastActionSuccess"]
        True
    """

    def __init__(self, **params: Any) -> None:
        self.initialization_parameters: dict[str, Any] = {}
        self.last_event: Event | MultiAgentEvent | None = None
        self.reset(**params)

    # ------------------------------------------------------------------ lifecycle
    def reset(self, scene: str | None = None, **params: Any) -> Event | MultiAgentEvent:
        """Load ``scene`` (default: the current one) with updated parameters; agents respawn."""
        merged = {
            **CONTROLLER_DEFAULTS,
            **AGENT_DEFAULTS,
            **self.initialization_parameters,
            **params,
        }
        if scene is not None:
            merged["scene"] = scene
        check_params(merged, CONSTRUCTOR_PARAMS, "Controller")
        loaded = load_scene(merged["scene"], merged["cache_dir"])
        # Placed before anything changes, so that a scene too small leaves the controller as it was.
        agents = start_poses(loaded.name, loaded.reachable, merged["agentCount"], merged["seed"])
        self.initialization_parameters = merged
        self.scene = loaded
        self.world = World(loaded, object_facts(), [], 1.0, 90.0)
        return self._start_agents(merged, agents, 0)

    def _start_agents(
        self, params: dict[str, Any], agents: list[AgentState], active: int
    ) -> Event | MultiAgentEvent:
        """Put ``agents`` in the world with the (checked) agent parameters ``params``."""
        world = self.world
        self.agent_count: int = params["agentCount"]
        self._screen = (params["width"], params["height"])
        world.agents = agents
        world.occupied = {(a.i, a.j): k for k, a in enumerate(agents)}
        world.visibility_distance = float(params["visibilityDistance"])
        world.fov = float(params["fieldOfView"])
        world.rotate_step = float(params["rotateStepDegrees"])
        self._last: list[tuple[str, ActionResult]] = [(INITIALIZE, OK)] * self.agent_count
        self.last_event = self._event(active if active < self.agent_count else 0)
        return self.last_event

    def _initialize(self, agent: int, args: dict[str, Any]) -> Event | MultiAgentEvent:
        """The ``Initialize`` step: agents re-created on the current scene, objects as they are.

        As in AI2-THOR the first agent keeps its pose and the others are new: they start at
        seeded free cells (``seed``). Held objects are set down where their holders stand.
        """
        params = initialize_params(args, self.initialization_parameters)
        world = self.world
        first = world.agents[0]
        check_room(self.scene.name, len(self.scene.reachable), params["agentCount"])
        free = [c for c in self.scene.reachable if c != (first.i, first.j)]
        others = start_poses(self.scene.name, free, params["agentCount"] - 1, params["seed"])
        for k, a in enumerate(world.agents):
            if a.held >= 0:
                drop(world, k, INITIALIZE)
        first = world.agents[0]
        world.tick += 1
        return self._start_agents(params, [first, *others], agent)

    def stop(self) -> None:
        """Nothing to release; kept for AI2-THOR compatibility."""

    # ------------------------------------------------------------------ stepping
    def _agent_id(self, agent_id: Any) -> int:
        if (
            not isinstance(agent_id, int)
            or isinstance(agent_id, bool)
            or not 0 <= agent_id < self.agent_count
        ):
            raise ValueError(
                f"agentId={agent_id!r} must be an integer in 0..{self.agent_count - 1}"
            )
        return agent_id

    @staticmethod
    def _split(action: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        if isinstance(action, dict):
            merged = {**action, **kwargs}
            return merged.pop("action", None), merged
        return action, dict(kwargs)

    def step(self, action: str | dict | None = None, **kwargs: Any) -> Event | MultiAgentEvent:
        """Run one action for one agent (``agentId``, default 0); the others stand still.

        Scene set-up actions run here too (see the class docstring).
        """
        name, args = self._split(action, kwargs)
        agent = self._agent_id(args.pop("agentId", 0))
        if name == INITIALIZE:
            return self._initialize(agent, args)
        name, spec, args = validate(name, args, setup=True)
        self._last[agent] = (name, spec.handler(self.world, agent, name, **args))
        self.world.tick += 1
        self.last_event = self._event(agent)
        return self.last_event

    def multi_step(
        self,
        actions: Sequence[str | dict | None],
        after_each: Callable[[int, ActionResult], None] | None = None,
    ) -> MultiAgentEvent:
        """Advance every agent by one action in a single tick (see the module's conflict rule).

        ``actions[i]`` is agent i's action: a name, a dict with key ``action`` and its arguments,
        or None to stand still. All actions are validated before any runs; a malformed one
        raises ValueError and leaves the state unchanged. ``after_each(agent, result)`` is called
        right after each agent's action, in resolution order (for credit assignment).
        """
        if isinstance(actions, str | dict) or len(actions) != self.agent_count:
            raise ValueError(
                f"multi_step needs a list of {self.agent_count} actions "
                "(one per agent, None to wait)"
            )
        calls: list[tuple[str, ActionSpec, dict[str, Any]] | None] = []
        for k, act in enumerate(actions):
            if act is None:
                calls.append(None)
                continue
            name, args = self._split(act, {})
            if "agentId" in args and args.pop("agentId") != k:
                raise ValueError(f"multi_step: actions[{k}] names a different agentId")
            calls.append(validate(name, args))
        saved = snapshot(self.world)
        n = self.agent_count
        try:
            for k in ((self.world.tick + r) % n for r in range(n)):
                call = calls[k]
                if call is not None:
                    name, spec, args = call
                    self._last[k] = (name, spec.handler(self.world, k, name, **args))
                    if after_each is not None:
                        after_each(k, self._last[k][1])
        except ValueError:
            restore(self.world, saved)
            raise
        self.world.tick += 1
        event = self._event(0)
        self.last_event = event
        return event if isinstance(event, MultiAgentEvent) else MultiAgentEvent(0, [event])

    def _event(self, active: int) -> Event | MultiAgentEvent:
        view = snapshot(self.world)
        events = [Event(view, k, *self._last[k], self._screen) for k in range(self.agent_count)]
        return events[0] if self.agent_count == 1 else MultiAgentEvent(active, events)

    # ------------------------------------------------------------------ conveniences
    @property
    def tick(self) -> int:
        """Steps and multi_steps since the last reset."""
        return self.world.tick

    def __repr__(self) -> str:
        return f"<Controller {self.scene.name} agents={self.agent_count} tick={self.tick}>"
