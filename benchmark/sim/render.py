"""Top-down maps of the embedded simulator: a PNG of one state, a GIF of an episode.

>>> from benchmark.sim import Controller
>>> from benchmark.sim.render import top_down
>>> image = top_down(Controller(scene="FloorPlan1", agentCount=2).world)
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

from PIL import Image, ImageDraw

from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import World, facing

AGENT_COLOURS = (
    (220, 50, 47),
    (38, 139, 210),
    (133, 153, 0),
    (211, 54, 130),
    (181, 137, 0),
    (108, 113, 196),
    (42, 161, 152),
    (203, 75, 22),
)
_BACKGROUND = (250, 250, 247)
_FLOOR = (222, 222, 214)
_FURNITURE = (150, 140, 125)
_OPEN_RECEPTACLE = (90, 160, 90)
_CLOSED_RECEPTACLE = (170, 90, 60)
_PICKUPABLE = (60, 60, 160)


def top_down(
    world: World,
    pixels_per_metre: int = 80,
    margin: float = 0.5,
    agents: bool | Collection[int] = True,
    cells: Collection[tuple[int, int]] | None = None,
    objects: Collection[int] | None = None,
) -> Image.Image:
    """Draw the reachable grid, object footprints, agents with their headings and held objects.

    Receptacles are outlined (green when open or not openable, brown when closed), pickupable
    objects are blue dots, each agent is a coloured disc with an arrow for its heading, a label
    ``a<k>`` and, when it holds something, the held object's type. ``agents=False`` leaves the
    agents out (a caller that draws them its own way); held objects stay hidden; a collection
    of agent indices draws only those. ``cells`` (grid cells) and ``objects`` (object indices)
    limit the floor and the objects drawn to those (what one agent has seen, say); None draws
    them all.
    """
    x0, x1, z0, z1 = world.scene.bounds
    x0, x1, z0, z1 = x0 - margin, x1 + margin, z0 - margin, z1 + margin
    width = max(1, int((x1 - x0) * pixels_per_metre))
    height = max(1, int((z1 - z0) * pixels_per_metre))
    image = Image.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(image)

    def px(x: float, z: float) -> tuple[float, float]:
        return (x - x0) * pixels_per_metre, (z1 - z) * pixels_per_metre  # +z points up

    half = GRID_SIZE / 2
    for i, j in world.scene.reachable:
        if cells is not None and (i, j) not in cells:
            continue
        a, b = px(i * GRID_SIZE - half, j * GRID_SIZE + half)
        c, d = px(i * GRID_SIZE + half, j * GRID_SIZE - half)
        draw.rectangle((a, b, c, d), fill=_FLOOR, outline=_BACKGROUND)

    for spec in world.specs:
        st = world.objs[spec.index]
        if not st.active or spec.object_type == "Floor" or world.carrier(spec.index) >= 0:
            continue
        if objects is not None and spec.index not in objects:
            continue
        bx0, bx1, _, _, bz0, bz1 = world.box(spec.index)
        a, b = px(bx0, bz1)
        c, d = px(bx1, bz0)
        if spec.pickupable:
            cx, cz = (a + c) / 2, (b + d) / 2
            draw.ellipse((cx - 3, cz - 3, cx + 3, cz + 3), fill=_PICKUPABLE)
        elif spec.receptacle:
            closed = spec.openable and not st.is_open
            draw.rectangle((a, b, c, d), outline=_CLOSED_RECEPTACLE if closed else _OPEN_RECEPTACLE)
        else:
            draw.rectangle((a, b, c, d), outline=_FURNITURE)

    radius = 0.18 * pixels_per_metre
    drawn = range(len(world.agents)) if agents is True else (agents or ())
    for k, agent in enumerate(world.agents):
        if k not in drawn:
            continue
        colour = AGENT_COLOURS[k % len(AGENT_COLOURS)]
        cx, cz = px(agent.i * GRID_SIZE, agent.j * GRID_SIZE)
        draw.ellipse((cx - radius, cz - radius, cx + radius, cz + radius), fill=colour)
        dx, dz = facing(agent.rotation)
        tip = (cx + dx * radius * 1.8, cz - dz * radius * 1.8)
        draw.line((cx, cz, *tip), fill=(0, 0, 0), width=3)
        label = f"a{k}"
        if agent.held >= 0:
            label += f" [{world.specs[agent.held].object_type}]"
        draw.text((cx + radius, cz + radius), label, fill=(0, 0, 0))
    return image


def save_png(world: World, path: str | os.PathLike[str], **kwargs: int) -> None:
    """Write :func:`top_down` of ``world`` to ``path`` as PNG."""
    top_down(world, **kwargs).save(path, format="PNG")


def save_gif(
    frames: Sequence[Image.Image], path: str | os.PathLike[str], ms_per_frame: int = 200
) -> None:
    """Write a sequence of top-down frames (e.g. one per tick) as an animated GIF."""
    if not frames:
        raise ValueError("save_gif needs at least one frame")
    first, *rest = frames
    first.save(path, format="GIF", save_all=True, append_images=rest, duration=ms_per_frame, loop=0)
