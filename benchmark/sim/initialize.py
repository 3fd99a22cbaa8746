"""Initialisation parameters: the Controller's own and the AI2-THOR ones it accepts.

The same parameters and checks serve ``Controller(...)``, ``Controller.reset(...)`` and the
``Initialize`` step action. Three kinds:

* parameters with an effect: ``agentCount``, ``gridSize`` (0.25 only), ``visibilityDistance``,
  ``fieldOfView``, ``rotateStepDegrees`` (the default turn of RotateLeft/RotateRight),
  ``width``/``height`` (the reported screen size), and the Controller's ``scene``, ``seed``
  (agents' start cells and headings) and ``cache_dir``;
* AI2-THOR parameters accepted as long as they ask for what the simulator does:
  ``snapToGrid`` must be True (agents stand on the grid) and ``agentMode`` must be
  ``"default"`` (no arm, drone or LoCoBot bodies);
* flags accepted and ignored because no frames are rendered and no Unity process runs
  (:data:`RENDER_FLAGS`, and in the constructor :data:`LAUNCHER_ARGS`).

Anything else raises ValueError naming the valid parameters, as does a bad value: AI2-THOR
reports a bad Initialize argument as a failed action (and ``reset`` raises RuntimeError); here it
is a malformed call whose message quotes AI2-THOR's where it has one.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from benchmark.sim.scene import GRID_SIZE

# The most agents a Controller takes; a scene must also have a reachable cell for each of them
# (checked when the agents are placed, see benchmark.sim.controller.start_poses).
MAX_AGENTS = 8

# Parameters with an effect; the defaults are AI2-THOR's (Initialize's, for an omitted one).
AGENT_DEFAULTS: dict[str, Any] = {
    "agentCount": 1,
    "gridSize": GRID_SIZE,
    "visibilityDistance": 1.5,
    "fieldOfView": 90,
    "rotateStepDegrees": 90,
    "snapToGrid": True,
    "agentMode": "default",
    "width": 300,
    "height": 300,
}
# The Controller's own parameters (not Initialize's).
CONTROLLER_DEFAULTS: dict[str, Any] = {"scene": "FloorPlan1", "seed": 0, "cache_dir": None}

# AI2-THOR image and Unity switches: accepted (booleans), no effect since nothing is rendered.
RENDER_FLAGS = (
    "renderImage",
    "renderDepthImage",
    "renderInstanceSegmentation",
    "renderSemanticSegmentation",
    "renderObjectImage",
    "renderClassImage",
    "renderNormalsImage",
    "renderFlowImage",
    "fastActionEmit",
    "makeAgentsVisible",
    "alwaysReturnVisibleRange",
)
# Arguments of ai2thor's Controller that choose, download or launch the Unity build: accepted
# by the constructor (any value) and ignored.
LAUNCHER_ARGS = (
    "quality",
    "fullscreen",
    "headless",
    "port",
    "start_unity",
    "local_executable_path",
    "local_build",
    "commit_id",
    "branch",
    "x_display",
    "host",
    "image_dir",
    "save_image_per_frame",
    "depth_format",
    "add_depth_noise",
    "download_only",
    "include_private_scenes",
    "server_class",
    "gpu_device",
    "platform",
    "server_timeout",
    "server_start_timeout",
)
# Rotation steps AI2-THOR allows under snapToGrid (besides multiples of 360).
GRID_TURNS = (90.0, 180.0, 270.0)

CONSTRUCTOR_PARAMS = frozenset(
    [*CONTROLLER_DEFAULTS, *AGENT_DEFAULTS, *RENDER_FLAGS, *LAUNCHER_ARGS]
)
INITIALIZE_PARAMS = frozenset([*AGENT_DEFAULTS, "seed", *RENDER_FLAGS])


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_params(params: dict[str, Any], allowed: Collection[str], where: str) -> None:
    """Raise ValueError if ``params`` holds an unknown name or a bad value.

    Args:
        params: the parameters to check (a complete set, defaults filled in).
        allowed: the names valid ``where``.
        where: how the error names the call, e.g. ``"Controller"`` or ``"Initialize"``.
    """
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"unknown {where} argument(s) {unknown}; valid arguments are {sorted(allowed)}"
        )
    count = params["agentCount"]
    if not _whole(count) or not 1 <= count <= MAX_AGENTS:
        raise ValueError(f"agentCount={count!r} must be an integer in 1..{MAX_AGENTS}")
    grid = params["gridSize"]
    if not _number(grid) or grid != GRID_SIZE:
        raise ValueError(
            f"gridSize={grid!r}: the embedded simulator supports only {GRID_SIZE}, "
            "the grid the reachable positions were recorded on"
        )
    vis = params["visibilityDistance"]
    if not _number(vis) or vis <= 0:
        raise ValueError(f"visibilityDistance={vis!r} must be a positive number of metres")
    fov = params["fieldOfView"]
    if not _number(fov) or not 0 < fov < 180:
        raise ValueError(f"fieldOfView={fov!r}: fov must be set to (0, 180) noninclusive (degrees)")
    _check_turn_step(params["rotateStepDegrees"], params["snapToGrid"])
    if params["agentMode"] != "default":
        raise ValueError(
            f"agentMode={params['agentMode']!r}: the embedded simulator has only AI2-THOR's "
            "'default' agent (no 'arm', 'drone' or 'locobot' bodies)"
        )
    for side in ("width", "height"):
        if not _whole(params[side]) or params[side] < 1:
            raise ValueError(f"{side}={params[side]!r} must be a positive integer of pixels")
    seed = params.get("seed", 0)
    if not _whole(seed) or seed < 0:
        raise ValueError(f"seed={seed!r} must be a non-negative integer")
    for flag in RENDER_FLAGS:
        if flag in params and not isinstance(params[flag], bool):
            raise ValueError(f"{flag}={params[flag]!r} must be True or False")


def _check_turn_step(step: Any, snap: Any) -> None:
    if not isinstance(snap, bool):
        raise ValueError(f"snapToGrid={snap!r} must be True or False")
    if not snap:
        raise ValueError(
            "snapToGrid=False: the embedded simulator keeps agents on the 0.25 m grid of the "
            "recorded reachable positions; only snapToGrid=True is supported"
        )
    if not _number(step) or step <= 0:
        raise ValueError(
            f"rotateStepDegrees={step!r}: rotateStepDegrees must be a non-zero, non-negative float"
        )
    if float(step) not in GRID_TURNS and float(step) % 360 != 0:
        raise ValueError(
            f"Invalid values 'rotateStepDegrees': ${step} and 'snapToGrid':{snap}. "
            "'snapToGrid': 'True' is not supported when 'rotateStepDegrees' is different from "
            "grid rotation steps of 0, 90, 180, 270 or 360."
        )


def initialize_params(args: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """The complete parameters of an ``Initialize`` step with arguments ``args``.

    As in AI2-THOR, an omitted parameter takes its default (so ``agentCount`` falls back to 1),
    except ``width``/``height`` and ``seed``, which keep their ``current`` values (AI2-THOR's
    Initialize does not change the resolution; the seed is the Controller's own).
    """
    params = {
        **AGENT_DEFAULTS,
        "width": current["width"],
        "height": current["height"],
        "seed": current["seed"],
        **args,
    }
    check_params(params, INITIALIZE_PARAMS, "Initialize")
    return params
