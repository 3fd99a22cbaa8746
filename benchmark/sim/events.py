"""AI2-THOR-compatible events whose metadata is built lazily from a state snapshot.

Most steps never read metadata, so an event keeps a snapshot of the world (cheap list copies)
and builds ``metadata`` on first access.
"""

from __future__ import annotations

from typing import Any

from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import ActionResult, World


def _xyz(x: float, y: float, z: float) -> dict[str, float]:
    return {"x": x, "y": y, "z": z}


def _aabb(box: tuple[float, float, float, float, float, float]) -> dict[str, Any]:
    x0, x1, y0, y1, z0, z1 = box
    return {
        "center": _xyz((x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2),
        "cornerPoints": [[x, y, z] for x in (x1, x0) for y in (y1, y0) for z in (z1, z0)],
        "size": _xyz(x1 - x0, y1 - y0, z1 - z0),
    }


def object_metadata(
    world: World,
    agent_index: int,
    index: int,
    children: dict[int, list[int]],
    out: dict[str, Any],
) -> dict[str, Any]:
    """Complete ``out`` (a fresh copy of the object's static record) into one entry of
    ``metadata["objects"]`` as seen by ``agent_index``."""
    spec, st = world.specs[index], world.objs[index]
    pos = world.position(index)
    x, y, z = pos
    box = world.box(index, pos)
    if spec.aabb is None or pos != spec.rest:
        out["axisAlignedBoundingBox"] = _aabb(box)
        if spec.oobb is not None:
            dx, dy, dz = x - spec.rest[0], y - spec.rest[1], z - spec.rest[2]
            corners = out["objectOrientedBoundingBox"]["cornerPoints"]
            out["objectOrientedBoundingBox"]["cornerPoints"] = [
                [cx + dx, cy + dy, cz + dz] for cx, cy, cz in corners
            ]
    parents = [world.specs[p].object_id for p in world.ancestors(index)]
    visible = world.visible(agent_index, index, box)
    out.update(
        {
            "position": _xyz(x, y, z),
            "parentReceptacles": parents or None,
            "receptacleObjectIds": (
                [world.specs[d].object_id for d in world.descendants(index, children)]
                if spec.receptacle
                else None
            ),
            "isOpen": st.is_open,
            "openness": st.openness,
            "isToggled": st.is_toggled,
            "isSliced": st.is_sliced,
            "isCooked": st.is_cooked,
            "isBroken": st.is_broken,
            "isDirty": st.is_dirty,
            "isFilledWithLiquid": st.is_filled,
            "fillLiquid": st.fill_liquid,
            "isUsedUp": st.is_used_up,
            "temperature": st.temperature,
            "isPickedUp": st.holder >= 0,
            "isMoving": False,
            "visible": visible,
            "isInteractable": visible,
            "distance": world.distance(agent_index, index, pos),
        }
    )
    return out


def build_metadata(
    world: World, agent_index: int, action: str, result: ActionResult, screen: tuple[int, int]
) -> dict[str, Any]:
    """The full AI2-THOR ``metadata`` dict for one agent."""
    agent = world.agents[agent_index]
    children = world.children()
    ax, az = agent.i * GRID_SIZE, agent.j * GRID_SIZE
    x0, x1, z0, z1 = world.scene.bounds
    held = agent.held
    return {
        "objects": [
            object_metadata(world, agent_index, k, children, static)
            for k, static in enumerate(world.static_records())
            if k not in world.removed
        ],
        "agent": {
            "name": "agent",
            "position": _xyz(ax, world.scene.agent_y, az),
            "rotation": _xyz(0.0, float(agent.rotation), 0.0),
            "cameraHorizon": float(agent.horizon),
            "isStanding": agent.standing,
            "inHighFrictionArea": False,
        },
        "inventoryObjects": (
            [{"objectId": world.specs[held].object_id, "objectType": world.specs[held].object_type}]
            if held >= 0
            else []
        ),
        "lastAction": action,
        "lastActionSuccess": result.success,
        "errorMessage": result.error,
        "actionReturn": result.action_return,
        "sceneName": world.scene.name,
        "agentId": agent_index,
        "fov": world.fov,
        "cameraPosition": _xyz(ax, world.camera_y(agent), az),
        "isSceneAtRest": True,
        "collided": False,
        "sceneBounds": {
            "center": _xyz((x0 + x1) / 2, world.scene.floor_y, (z0 + z1) / 2),
            "size": _xyz(x1 - x0, 0.0, z1 - z0),
        },
        "screenWidth": screen[0],
        "screenHeight": screen[1],
    }


class Event:
    """The result of a step for one agent; ``metadata`` is AI2-THOR's dict, built on access."""

    __slots__ = ("_action", "_agent", "_metadata", "_result", "_screen", "_world")

    def __init__(
        self,
        world: World,
        agent_index: int,
        action: str,
        result: ActionResult,
        screen: tuple[int, int],
    ) -> None:
        self._world = world
        self._agent = agent_index
        self._action = action
        self._result = result
        self._screen = screen
        self._metadata: dict[str, Any] | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            self._metadata = build_metadata(
                self._world, self._agent, self._action, self._result, self._screen
            )
        return self._metadata

    @property
    def events(self) -> list[Event]:
        return [self]

    @property
    def last_action_success(self) -> bool:
        return self._result.success

    @property
    def frame(self) -> Any:
        raise AttributeError(
            "the embedded simulator renders no egocentric frames; use benchmark.sim.render for "
            "top-down maps, or benchmark.sim.thor for the Unity build"
        )

    def __repr__(self) -> str:
        ok = "ok" if self._result.success else f"failed: {self._result.error}"
        return f"<Event agent={self._agent} {self._action} {ok}>"


class MultiAgentEvent:
    """AI2-THOR's multi-agent event: ``events[i]`` per agent, ``metadata`` of the acting one."""

    __slots__ = ("active_agent_id", "events")

    def __init__(self, active_agent_id: int, events: list[Event]) -> None:
        self.active_agent_id = active_agent_id
        self.events = events

    @property
    def metadata(self) -> dict[str, Any]:
        return self.events[self.active_agent_id].metadata

    def __repr__(self) -> str:
        return f"<MultiAgentEvent active={self.active_agent_id} {self.events}>"
