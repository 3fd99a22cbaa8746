"""The mutable state of one simulation: objects, agents, and the queries actions need.

All state lives in lists of immutable records (:class:`ObjState`, :class:`AgentState`), so an
event can keep a snapshot by copying the lists, and metadata can be built lazily later.
"""

from __future__ import annotations

import marshal
import math
from typing import Any, NamedTuple

from benchmark.sim.facts import ObjectFacts
from benchmark.sim.failures import Failure
from benchmark.sim.scene import (
    CAMERA_CROUCHING,
    CAMERA_STANDING,
    GRID_SIZE,
    ObjectSpec,
    ObjState,
    Scene,
)
from benchmark.sim.visibility import Box, sees_box

HELD_REACH = 0.3  # metres in front of the agent where a held object is carried
HELD_DROP = 0.3  # metres below the camera


class AgentState(NamedTuple):
    """One agent: grid cell (i, j), heading and pitch in degrees, posture, held object index.

    ``rotation`` is exact, in [0, 360): an int on the 90-degree grid and wherever the turns
    added up to a whole number of degrees, else a float (see :mod:`benchmark.sim.navigation`).
    """

    i: int
    j: int
    rotation: float
    horizon: float
    standing: bool
    held: int


class ActionResult(NamedTuple):
    """What an action did: AI2-THOR's ``lastActionSuccess``, ``errorMessage``, ``actionReturn``,
    and for a failure its structured ``reason`` and the ``other_agent`` involved (the one
    holding the target or standing in the way; -1 if none)."""

    success: bool
    error: str = ""
    action_return: Any = None
    reason: Failure | None = None
    other_agent: int = -1


OK = ActionResult(True)


def failed(reason: Failure, message: str, other_agent: int = -1) -> ActionResult:
    """A failed action's result."""
    return ActionResult(False, message, None, reason, other_agent)


HEADINGS = {0: (0, 1), 90: (1, 0), 180: (0, -1), 270: (-1, 0)}


def facing(rotation: float) -> tuple[float, float]:
    """Unit (dx, dz) of a heading in degrees (0 faces +z, 90 faces +x); exact on the grid."""
    grid = HEADINGS.get(int(rotation)) if rotation == int(rotation) else None
    if grid is not None:
        return grid
    rad = math.radians(rotation)
    return math.sin(rad), math.cos(rad)


class World:
    """Simulation state plus the containment, geometry and visibility queries over it."""

    def __init__(
        self,
        scene: Scene,
        facts: ObjectFacts,
        agents: list[AgentState],
        visibility_distance: float,
        fov: float,
    ) -> None:
        self.scene = scene
        self.facts = facts
        self.specs: tuple[ObjectSpec, ...] = scene.specs
        self.objs: list[ObjState] = list(scene.initial)
        self.index_of: dict[str, int] = dict(scene.index_of)
        self.agents: list[AgentState] = agents
        self.occupied: dict[tuple[int, int], int] = {(a.i, a.j): k for k, a in enumerate(agents)}
        self.visibility_distance = visibility_distance
        self.fov = fov
        self.rotate_step = 90.0  # degrees RotateLeft/RotateRight turn by default
        # Objects taken out of the scene by SetObjectPoses: absent from metadata and index_of.
        self.removed: frozenset[int] = frozenset()
        self.tick = 0

    # ----------------------------------------------------------------- containment
    def ancestors(self, index: int) -> list[int]:
        """Receptacles holding ``index``, innermost first."""
        out = []
        parent = self.objs[index].parent
        while parent >= 0 and len(out) < 64:
            out.append(parent)
            parent = self.objs[parent].parent
        return out

    def carrier(self, index: int) -> int:
        """The agent carrying ``index`` directly or inside a held receptacle; -1 if none."""
        state = self.objs[index]
        while state.holder < 0 and state.parent >= 0:
            state = self.objs[state.parent]
        return state.holder

    def children(self) -> dict[int, list[int]]:
        """Receptacle index -> active objects resting in it directly."""
        out: dict[int, list[int]] = {}
        for k, st in enumerate(self.objs):
            if st.parent >= 0 and st.active:
                out.setdefault(st.parent, []).append(k)
        return out

    def descendants(self, index: int, children: dict[int, list[int]] | None = None) -> list[int]:
        kids = self.children() if children is None else children
        out, stack = [], list(kids.get(index, ()))
        while stack:
            k = stack.pop()
            out.append(k)
            stack.extend(kids.get(k, ()))
        return out

    def enclosed(self, index: int) -> bool:
        """Whether a pickupable object sits inside a closed receptacle (directly or nested)."""
        k = index
        while self.specs[k].pickupable:
            parent = self.objs[k].parent
            if parent < 0:
                return False
            if self.specs[parent].openable and not self.objs[parent].is_open:
                return True
            k = parent
        return False

    # ----------------------------------------------------------------- geometry
    def camera_y(self, agent: AgentState) -> float:
        return self.scene.agent_y + (CAMERA_STANDING if agent.standing else CAMERA_CROUCHING)

    def agent_xz(self, agent: AgentState) -> tuple[float, float]:
        return agent.i * GRID_SIZE, agent.j * GRID_SIZE

    def position(self, index: int) -> tuple[float, float, float]:
        """Where the object is now; carried objects follow the carrying agent."""
        st = self.objs[index]
        who = self.carrier(index)
        if who < 0:
            return st.x, st.y, st.z
        root = index
        while self.objs[root].holder < 0:
            root = self.objs[root].parent
        agent = self.agents[who]
        dx, dz = facing(agent.rotation)
        hx = agent.i * GRID_SIZE + HELD_REACH * dx
        hz = agent.j * GRID_SIZE + HELD_REACH * dz
        hy = self.camera_y(agent) - HELD_DROP
        rs = self.objs[root]
        return hx + st.x - rs.x, hy + st.y - rs.y, hz + st.z - rs.z

    def box(self, index: int, position: tuple[float, float, float] | None = None) -> Box:
        """Axis-aligned box of the object, at ``position`` if given (else where it is now)."""
        x, y, z = self.position(index) if position is None else position
        spec = self.specs[index]
        (ox, oy, oz), (hx, hy, hz) = spec.offset, spec.half
        return (x + ox - hx, x + ox + hx, y + oy - hy, y + oy + hy, z + oz - hz, z + oz + hz)

    def visible(self, agent_index: int, index: int, box: Box | None = None) -> bool:
        """AI2-THOR's ``visible`` for one agent and one object (``box``: its current box).

        Seen geometrically (see :mod:`benchmark.sim.visibility`), or lying directly in an open
        container the agent sees: looking into an open drawer shows what is in it.
        """
        st = self.objs[index]
        if not st.active:
            return False
        who = self.carrier(index)
        if who == agent_index:
            return True
        if who < 0 and self.enclosed(index):
            return False
        agent = self.agents[agent_index]
        if sees_box(
            self.scene,
            agent.i * GRID_SIZE,
            agent.j * GRID_SIZE,
            agent.rotation,
            agent.horizon,
            self.camera_y(agent),
            self.box(index) if box is None else box,
            self.visibility_distance,
            self.fov,
        ):
            return True
        parent = st.parent
        return (
            who < 0
            and parent >= 0
            and self.specs[index].pickupable
            and self.specs[parent].openable
            and self.objs[parent].is_open
            and self.visible(agent_index, parent)
        )

    def distance(
        self, agent_index: int, index: int, position: tuple[float, float, float] | None = None
    ) -> float:
        """Euclidean distance from the agent's position to the object's position, metres."""
        agent = self.agents[agent_index]
        x, y, z = self.position(index) if position is None else position
        return math.sqrt(
            (x - agent.i * GRID_SIZE) ** 2
            + (y - self.scene.agent_y) ** 2
            + (z - agent.j * GRID_SIZE) ** 2
        )

    def static_records(self) -> list[dict[str, Any]]:
        """Fresh deep copies of every object's static metadata record, in object order.

        One ``marshal.loads`` of the scene's blob is the cheapest deep copy there is; objects
        created by actions add their own.
        """
        records = marshal.loads(self.scene.static_blob)
        records.extend(marshal.loads(s.blob) for s in self.specs[len(records) :])
        return records

    # ----------------------------------------------------------------- updates
    def update(self, index: int, **changes: Any) -> None:
        self.objs[index] = self.objs[index]._replace(**changes)

    def add_object(self, spec: ObjectSpec, state: ObjState) -> int:
        """Append an object created by an action; returns its index."""
        self.specs = (*self.specs, spec)
        self.objs.append(state)
        # A new dict, not an update: snapshots share the old one and must not see the object.
        self.index_of = {**self.index_of, spec.object_id: spec.index}
        return spec.index

    def remove_object(self, index: int) -> None:
        """Take an object out of the scene for good (SetObjectPoses): it leaves the metadata
        and its objectId becomes unknown."""
        self.update(index, active=False, parent=-1, holder=-1)
        oid = self.specs[index].object_id
        # New containers, not updates: snapshots share the old ones.
        self.index_of = {k: v for k, v in self.index_of.items() if k != oid}
        self.removed = self.removed | {index}

    def move_agent(self, agent_index: int, agent: AgentState) -> None:
        old = self.agents[agent_index]
        if (old.i, old.j) != (agent.i, agent.j):
            del self.occupied[(old.i, old.j)]
            self.occupied[(agent.i, agent.j)] = agent_index
        self.agents[agent_index] = agent


def find_target(
    world: World, a: int, action: str, object_id: str, force: bool, allow_held: bool = False
) -> tuple[int, ActionResult | None]:
    """Resolve ``object_id`` for agent ``a``; returns (index, None) or (-1, failure).

    ``force`` (AI2-THOR's ``forceAction``) skips what AI2-THOR's flag skips, the sight checks:
    distance, field of view, line of sight and being shut inside a closed receptacle. It never
    finds an unknown or vanished object, nor one in another agent's hands.
    """
    index = world.index_of.get(object_id, -1)
    if index < 0:
        return -1, failed(
            Failure.UNKNOWN_OBJECT,
            f"{action} failed: Object ID appears to be invalid: {object_id!r}",
        )
    st = world.objs[index]
    if not st.active:
        return -1, failed(Failure.GONE, f"{action} failed: {object_id} is no longer in the scene")
    who = world.carrier(index)
    if who == a and not allow_held:
        return -1, failed(
            Failure.HELD_BY_SELF, f"{action} failed: {object_id} is held by this agent"
        )
    if who >= 0 and who != a:
        return -1, failed(
            Failure.HELD_BY_OTHER, f"{action} failed: {object_id} is held by agent {who}", who
        )
    if who < 0 and not force and world.enclosed(index):
        return -1, failed(
            Failure.ENCLOSED, f"{action} failed: {object_id} is inside a closed receptacle"
        )
    if not force and who != a and not world.visible(a, index):
        return -1, failed(
            Failure.NOT_VISIBLE,
            f"{action} failed: {object_id} is not visible to agent {a} "
            f"(within {world.visibility_distance} m, in view and in line of sight)",
        )
    return index, None


def snapshot(world: World) -> World:
    """A frozen copy of ``world`` for events: shares the scene, copies the state lists."""
    view = object.__new__(World)
    view.__dict__.update(world.__dict__)
    view.objs = list(world.objs)
    view.agents = list(world.agents)
    view.occupied = dict(world.occupied)
    return view


def restore(world: World, saved: World) -> None:
    """Put ``world`` back to the state in ``saved`` (a :func:`snapshot`)."""
    world.__dict__.update(snapshot(saved).__dict__)
