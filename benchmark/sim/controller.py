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

from benchmark.sim.actions import ActionSpec, validate
from benchmark.sim.events import Event, MultiAgentEvent
from benchmark.sim.facts import object_facts
from benchmark.sim.scene import GRID_SIZE, Scene, load_scene
from benchmark.sim.world import ActionResult, AgentState, World, restore, snapshot

MAX_AGENTS = 5
_INIT_DEFAULTS: dict[str, Any] = {
    "scene": "FloorPlan1",
    "agentCount": 1,
    "gridSize": GRID_SIZE,
    "visibilityDistance": 1.5,
    "fieldOfView": 90,
    "seed": 0,
    "width": 300,
    "height": 300,
    "cache_dir": None,
}


def _check_init(params: dict[str, Any]) -> None:
    unknown = sorted(set(params) - set(_INIT_DEFAULTS))
    if unknown:
        raise ValueError(
            f"unknown Controller argument(s) {unknown}; "
            f"valid arguments are {sorted(_INIT_DEFAULTS)}"
        )
    count = params["agentCount"]
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_AGENTS:
        raise ValueError(f"agentCount={count!r} must be an integer in 1..{MAX_AGENTS}")
    if params["gridSize"] != GRID_SIZE:
        raise ValueError(
            f"gridSize={params['gridSize']!r}: the embedded simulator supports only {GRID_SIZE}, "
            "the grid the reachable positions were recorded on"
        )
    vis = params["visibilityDistance"]
    if not isinstance(vis, int | float) or isinstance(vis, bool) or vis <= 0:
        raise ValueError(f"visibilityDistance={vis!r} must be a positive number of metres")
    fov = params["fieldOfView"]
    if not isinstance(fov, int | float) or isinstance(fov, bool) or not 0 < fov < 180:
        raise ValueError(f"fieldOfView={fov!r} must be in (0, 180) degrees")
    seed = params["seed"]
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed={seed!r} must be a non-negative integer")


def start_poses(scene: Scene, count: int, seed: int) -> list[AgentState]:
    """Distinct seeded start cells and headings on the reachable grid."""
    if count > len(scene.reachable):
        raise ValueError(f"{scene.name} has only {len(scene.reachable)} reachable cells")
    rng = np.random.default_rng(seed)
    cells = rng.choice(len(scene.reachable), size=count, replace=False)
    headings = rng.integers(0, 4, size=count) * 90
    return [
        AgentState(*scene.reachable[c], rotation=int(h), horizon=0, standing=True, held=-1)
        for c, h in zip(cells, headings, strict=True)
    ]


class Controller:
    """Embedded, AI2-THOR-compatible multi-agent simulator on the real iTHOR scenes.

    Args:
        scene: ``FloorPlanN`` or ``FloorPlanN_physics`` (the 120 iTHOR floor plans).
        agentCount: number of agents, 1..5.
        gridSize: must be 0.25 (metres).
        visibilityDistance: how far an agent sees and reaches, metres.
        fieldOfView: horizontal and vertical field of view, degrees.
        seed: chooses the agents' start cells and headings.
        width, height: reported screen size (no frames are rendered).
        cache_dir: asset cache directory (default: see :func:`benchmark.paths.cache_dir`).

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
        merged = {**_INIT_DEFAULTS, **self.initialization_parameters, **params}
        if scene is not None:
            merged["scene"] = scene
        _check_init(merged)
        loaded = load_scene(merged["scene"], merged["cache_dir"])
        self.initialization_parameters = merged
        self.scene = loaded
        self.agent_count: int = merged["agentCount"]
        self._screen = (int(merged["width"]), int(merged["height"]))
        self.world = World(
            loaded,
            object_facts(),
            start_poses(loaded, self.agent_count, merged["seed"]),
            float(merged["visibilityDistance"]),
            float(merged["fieldOfView"]),
        )
        self._last: list[tuple[str, ActionResult]] = [
            ("Initialize", ActionResult(True))
        ] * self.agent_count
        self.last_event = self._event(0)
        return self.last_event

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
        """Run one action for one agent (``agentId``, default 0); the others stand still."""
        name, args = self._split(action, kwargs)
        agent = self._agent_id(args.pop("agentId", 0))
        name, spec, args = validate(name, args)
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
