"""The embedded AI2-THOR-compatible multi-agent simulator on the real iTHOR scenes.

>>> from benchmark.sim import Controller
>>> c = Controller(scene="FloorPlan1", agentCount=2, seed=0)
"""

from benchmark.sim.catalog import ithor_scenes, normalize_scene, room_type_of
from benchmark.sim.controller import Controller
from benchmark.sim.events import Event, MultiAgentEvent
from benchmark.sim.scene import Scene, load_scene

__all__ = [
    "Controller",
    "Event",
    "MultiAgentEvent",
    "Scene",
    "ithor_scenes",
    "load_scene",
    "normalize_scene",
    "room_type_of",
]
