"""Geometric visibility: distance, field of view, and line of sight on the scene grid.

An agent at (ax, az) with heading ``rotation`` (degrees; 0 faces +z, 90 faces +x) and camera
pitch ``horizon`` (degrees; positive looks down) sees an axis-aligned box when:

1. the nearest point of the box's footprint is within ``visibility_distance`` (horizontal metres);
2. the footprint overlaps the horizontal field of view, ``fov`` degrees wide;
3. the box's height range overlaps the vertical field of view (also ``fov``: frames are square),
   seen from at least the agent's body radius away;
4. the line from the agent to that nearest point crosses only open cells of the grid.
"""

from __future__ import annotations

import math

from benchmark.sim.scene import Scene

Box = tuple[float, float, float, float, float, float]  # x0, x1, y0, y1, z0, z1
AGENT_RADIUS = 0.2  # metres


def _wrap(deg: float) -> float:
    return (deg + 180.0) % 360.0 - 180.0


def sees_box(
    scene: Scene,
    ax: float,
    az: float,
    rotation: float,
    horizon: float,
    camera_y: float,
    box: Box,
    visibility_distance: float,
    fov: float,
) -> bool:
    """Whether the agent's camera sees any part of ``box`` (see the module docstring)."""
    x0, x1, y0, y1, z0, z1 = box
    nx = x0 if ax < x0 else (x1 if ax > x1 else ax)
    nz = z0 if az < z0 else (z1 if az > z1 else az)
    dh = math.hypot(nx - ax, nz - az)
    if dh > visibility_distance:
        return False
    half = fov / 2.0
    if dh > 1e-9:
        base = math.degrees(math.atan2((x0 + x1) / 2 - ax, (z0 + z1) / 2 - az))
        rel = _wrap(base - rotation)
        lo = hi = 0.0
        for cx, cz in ((x0, z0), (x0, z1), (x1, z0), (x1, z1)):
            d = _wrap(math.degrees(math.atan2(cx - ax, cz - az)) - base)
            lo = d if d < lo else lo
            hi = d if d > hi else hi
        if rel + lo > half or rel + hi < -half:
            return False
    # The camera sits inside the agent's body, so nothing is nearer than the body's radius.
    dv = dh if dh > AGENT_RADIUS else AGENT_RADIUS
    top = math.degrees(math.atan2(y1 - camera_y, dv))
    bottom = math.degrees(math.atan2(y0 - camera_y, dv))
    if bottom > -horizon + half or top < -horizon - half:
        return False
    return dh <= 1e-9 or scene.line_of_sight(ax, az, nx, nz)


def visible_headings(
    scene: Scene,
    ax: float,
    az: float,
    camera_y: float,
    box: Box,
    visibility_distance: float,
    fov: float,
    headings: tuple[int, ...] = (0, 90, 180, 270),
    horizons: tuple[int, ...] = (0, 30, 60, -30),
) -> list[tuple[int, int]]:
    """The (heading, pitch) pairs from which a standing agent at (ax, az) sees ``box``.

    Same rule as :func:`sees_box`; the distance and line-of-sight parts are computed once.
    """
    x0, x1, _, _, z0, z1 = box
    nx = x0 if ax < x0 else (x1 if ax > x1 else ax)
    nz = z0 if az < z0 else (z1 if az > z1 else az)
    dh = math.hypot(nx - ax, nz - az)
    if dh > visibility_distance or (dh > 1e-9 and not scene.line_of_sight(ax, az, nx, nz)):
        return []
    return [
        (h, v)
        for h in headings
        for v in horizons
        if sees_box(scene, ax, az, h, v, camera_y, box, visibility_distance, fov)
    ]
