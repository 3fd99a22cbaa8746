"""Adapter for the real AI2-THOR (Unity) simulator behind the embedded ``Controller`` API.

Needs the ``thor`` extra (``pip install -e '.[thor]'``, ai2thor==5.0.0) and a Unity build, which
AI2-THOR downloads at start-up and runs with a GPU or a display. Where neither can be had the
adapter raises :class:`ThorUnavailable` within ``start_timeout`` seconds instead of hanging.

Differences it bridges: agents start at the same seeded cells as in the embedded simulator, and
``multi_step`` runs the agents one after another in the embedded simulator's rotating priority
order, since AI2-THOR steps one agent per call.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmark.sim.catalog import normalize_scene


class ThorUnavailable(RuntimeError):
    """The real AI2-THOR backend cannot run here."""


def _start(params: dict[str, Any], timeout: float) -> Any:
    try:
        from ai2thor.controller import Controller as UnityController
    except ImportError as err:
        raise ThorUnavailable(
            "the real AI2-THOR backend needs the 'thor' extra: pip install -e '.[thor]' "
            f"(ai2thor==5.0.0), plus a machine that can run its Unity build ({err})"
        ) from err
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["controller"] = UnityController(**params)
        except BaseException as err:  # any start failure is reported to the caller below
            box["error"] = err

    worker = threading.Thread(target=target, name="ai2thor-start", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise ThorUnavailable(
            f"AI2-THOR's Unity build did not start within {timeout:g} s (it is downloaded at "
            "start-up and needs network access and a GPU or display); use benchmark.sim.Controller"
        )
    if "error" in box:
        err = box["error"]
        raise ThorUnavailable(
            f"AI2-THOR's Unity build could not start: {type(err).__name__}: {err}"
        ) from err
    return box["controller"]


class ThorController:
    """The real AI2-THOR ``Controller`` with the embedded simulator's interface.

    Args mirror :class:`benchmark.sim.Controller`; ``start_timeout`` bounds the Unity start-up
    and ``thor_kwargs`` pass through to ``ai2thor.controller.Controller``.
    """

    def __init__(
        self,
        scene: str = "FloorPlan1",
        agentCount: int = 1,
        gridSize: float = 0.25,
        visibilityDistance: float = 1.5,
        fieldOfView: float = 90,
        seed: int = 0,
        start_timeout: float = 120.0,
        **thor_kwargs: Any,
    ) -> None:
        self.agent_count = agentCount
        self.seed = seed
        self._tick = 0
        self._controller = _start(
            {
                "scene": normalize_scene(scene),
                "agentCount": agentCount,
                "gridSize": gridSize,
                "visibilityDistance": visibilityDistance,
                "fieldOfView": fieldOfView,
                **thor_kwargs,
            },
            start_timeout,
        )
        self.last_event = self._place_agents()

    def _place_agents(self) -> Any:
        reachable = self._controller.step(action="GetReachablePositions").metadata["actionReturn"]
        cells = sorted((round(p["x"] * 4), round(p["z"] * 4)) for p in reachable)
        rng = np.random.default_rng(self.seed)
        chosen = rng.choice(len(cells), size=self.agent_count, replace=False)
        headings = rng.integers(0, 4, size=self.agent_count) * 90
        y = reachable[0]["y"]
        event = None
        for k, (c, h) in enumerate(zip(chosen, headings, strict=True)):
            i, j = cells[c]
            event = self._controller.step(
                action="TeleportFull",
                position={"x": i / 4, "y": y, "z": j / 4},
                rotation={"x": 0, "y": int(h), "z": 0},
                horizon=0,
                standing=True,
                agentId=k,
            )
        self._tick = 0
        return event

    def reset(self, scene: str | None = None, **params: Any) -> Any:
        if scene is not None:
            params["scene"] = normalize_scene(scene)
        self.seed = params.pop("seed", self.seed)
        self._controller.reset(**params)
        self.last_event = self._place_agents()
        return self.last_event

    def step(self, action: str | dict | None = None, **kwargs: Any) -> Any:
        self.last_event = self._controller.step(action, **kwargs)
        self._tick += 1
        return self.last_event

    def multi_step(self, actions: Sequence[str | dict | None]) -> Any:
        if len(actions) != self.agent_count:
            raise ValueError(f"multi_step needs a list of {self.agent_count} actions")
        event = self.last_event
        for k in ((self._tick + r) % self.agent_count for r in range(self.agent_count)):
            act = actions[k]
            if act is None:
                continue
            call = {"action": act} if isinstance(act, str) else dict(act)
            event = self._controller.step(**call, agentId=k)
        self._tick += 1
        self.last_event = event
        return event

    def stop(self) -> None:
        self._controller.stop()
