"""Pictures the server draws itself: an entry's metrics against the other entries of its track
(matplotlib, PNG) and replays of its episodes (a labelled PNG per tick, a GIF of the whole
episode), drawn from the verified traces; never an uploaded image.

A replay frame is the top-down map of :func:`benchmark.sim.render.top_down` with the agents drawn
as numbered discs (no text on the map, so labels never overlap) beside a panel: the tick
counter, the checklist's progress bar, each agent's colour, name and held object, and the key
to the map's symbols.
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure
from PIL import Image, ImageDraw, ImageFont

from benchmark.media.viewer import checklist_states, replay_worlds
from benchmark.sim.render import AGENT_COLOURS, top_down
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import World, facing

PLOT_METRICS = ("SR", "TR", "C", "B")  # fractions in [0, 1], drawn on one axis
PLOT_INCHES = (9.0, 3.6)
PLOT_DPI = 100  # the PNG is 900 x 360 pixels
# The axes take the left of the figure and the legend the right, so it never covers a bar.
PLOT_AXES = (0.07, 0.1, 0.55, 0.82)  # left, bottom, width, height (fractions of the figure)
LEGEND_ANCHOR = (0.64, 0.92)  # the legend's upper left corner
LEGEND_CHARS = 40  # longer labels are cut, with an ellipsis
PLOT_BOTTOM = -0.08  # below 0, so that a bar of 0 stands clear of the axis

MAP_MARGIN_M = 0.5  # floor around the scene's bounds, as top_down draws it
FRAME_MAP_PX = 560  # the longer side of a tick's map
GIF_MAP_PX = 400  # the longer side of the GIF's map
MAX_GIF_FRAMES = 200  # a longer episode keeps every k-th tick, and always its last
GIF_COLOURS = 96
GIF_MS_PER_FRAME = 150
_INK = (29, 35, 43)
_MUTED = (91, 102, 115)
_PANEL = (255, 255, 255)
_BAR = (222, 226, 231)
_DONE = (30, 123, 52)


def _label(text: str) -> str:
    # matplotlib reads $...$ as mathematics (a malformed formula raises); show it as typed.
    if len(text) > LEGEND_CHARS:
        text = text[: LEGEND_CHARS - 1] + "…"
    return text.replace("$", r"\$")


def metrics_figure(
    entry: str,
    cells: Mapping[str, Mapping[str, Any]],
    baselines: Mapping[str, Mapping[str, Mapping[str, Any]]],
    metrics: Sequence[str] = PLOT_METRICS,
) -> Figure:
    """A bar chart: per metric, the entry's mean and 95% interval beside each other entry's.

    Every bar is outlined and its mean marked (a diamond) and written above it, so a mean of 0
    shows; the legend sits outside the axes. A metric an entry does not define is left out.

    Args:
        entry: the entry's label.
        cells: metric -> ``{"mean", "lo", "hi"}`` of the entry (its summary's ``all`` family).
        baselines: label -> such cells, for the other entries of the same track.
        metrics: the metrics to draw (fractions).
    """
    series = {_label(entry): cells, **{_label(k): v for k, v in baselines.items() if k != entry}}
    fig = Figure(figsize=PLOT_INCHES, dpi=PLOT_DPI)
    ax = fig.add_axes(PLOT_AXES)
    width = 0.8 / max(1, len(series))
    colours = [f"C{s % 10}" for s in range(len(series))]
    for s, (label, values) in enumerate(series.items()):
        xs, means, errors = [], [], [[], []]
        for m, name in enumerate(metrics):
            cell = values.get(name) or {}
            if cell.get("mean") is None:
                continue
            xs.append(m + (s - (len(series) - 1) / 2) * width)
            means.append(cell["mean"])
            # A bound of 0.0 is a bound: only a missing one (None) draws no whisker.
            lo = cell["mean"] if cell.get("lo") is None else cell["lo"]
            hi = cell["mean"] if cell.get("hi") is None else cell["hi"]
            errors[0].append(max(0.0, cell["mean"] - lo))
            errors[1].append(max(0.0, hi - cell["mean"]))
        colour = colours[s]
        ax.bar(xs, means, width, color=colour, edgecolor="black", linewidth=0.6, label=label)
        ax.errorbar(xs, means, yerr=errors, fmt="none", ecolor="black", elinewidth=0.8, capsize=2)
        ax.plot(xs, means, "D", color=colour, markeredgecolor="black", markersize=4, zorder=3)
        for x, mean, up in zip(xs, means, errors[1], strict=True):
            ax.text(
                x,
                mean + up + 0.02,
                f"{mean:.2f}",
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=6.5,
            )
    ax.axhline(0.0, color="#888888", linewidth=0.6, zorder=0)
    ax.set_xticks(range(len(metrics)), metrics)
    ax.set_xlim(-0.5, len(metrics) - 0.5)
    ax.set_ylim(PLOT_BOTTOM, 1.22)
    ax.set_yticks([0.0, 0.25, 0.5, 0.75, 1.0])
    ax.set_ylabel("mean, 95% interval")
    fig.legend(
        *ax.get_legend_handles_labels(),
        loc="upper left",
        bbox_to_anchor=LEGEND_ANCHOR,
        fontsize=8,
        frameon=False,
    )
    return fig


def metrics_plot(
    entry: str,
    cells: Mapping[str, Mapping[str, Any]],
    baselines: Mapping[str, Mapping[str, Mapping[str, Any]]],
    metrics: Sequence[str] = PLOT_METRICS,
) -> bytes:
    """:func:`metrics_figure` as a PNG of 900 x 360 pixels."""
    out = io.BytesIO()
    metrics_figure(entry, cells, baselines, metrics).savefig(out, format="png")
    return out.getvalue()


# --- replays ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FrameCaption:
    """What a replay frame's panel says besides the world: the episode, the tick (after
    ``tick`` of ``ticks`` ticks) and the checklist atoms satisfied then."""

    title: str
    tick: int
    ticks: int
    satisfied: int
    atoms: int


@functools.cache
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _scale(world: World, map_px: int) -> int:
    """Pixels per metre that make the map's longer side about ``map_px``."""
    x0, x1, z0, z1 = world.scene.bounds
    longest = max(x1 - x0, z1 - z0) + 2 * MAP_MARGIN_M
    return max(10, int(map_px / longest))


def _agents(image: Image.Image, world: World, pixels_per_metre: int) -> None:
    """Each agent as a disc of its colour with its number and a heading line; a disc is a bit
    under a grid cell wide, so agents in neighbouring cells never cover each other."""
    draw = ImageDraw.Draw(image)
    x0, _, _, z1 = world.scene.bounds
    x0, z1 = x0 - MAP_MARGIN_M, z1 + MAP_MARGIN_M
    radius = 0.46 * GRID_SIZE * pixels_per_metre
    font = _font(max(8, int(radius * 1.3)))
    for k, agent in enumerate(world.agents):
        cx = (agent.i * GRID_SIZE - x0) * pixels_per_metre
        cz = (z1 - agent.j * GRID_SIZE) * pixels_per_metre
        dx, dz = facing(agent.rotation)
        tip = (cx + dx * radius * 2.2, cz - dz * radius * 2.2)
        draw.line((cx, cz, *tip), fill=_INK, width=max(2, int(radius / 3)))
        box = (cx - radius, cz - radius, cx + radius, cz + radius)
        draw.ellipse(box, fill=AGENT_COLOURS[k % len(AGENT_COLOURS)], outline=_INK)
        draw.text((cx, cz), str(k), fill=(255, 255, 255), font=font, anchor="mm")


def _bar(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], done: float) -> None:
    x0, y0, x1, y1 = box
    draw.rectangle(box, fill=_BAR)
    if done > 0:
        draw.rectangle((x0, y0, x0 + round((x1 - x0) * done), y1), fill=_DONE)
    draw.rectangle(box, outline=_INK)


def _wrap(text: str, chars: int) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > chars:
            lines.append(line)
            line = ""
        line = f"{line} {word}".strip()
    return [*lines, line][:3]


def _panel(world: World, caption: FrameCaption, unit: int, height: int) -> Image.Image:
    """The panel beside the map, ``unit`` pixels its text size, cut to what it holds (and at
    least ``height`` tall)."""
    big, small = _font(unit + 4), _font(unit)
    width, line, r = unit * 22, int(unit * 1.5), unit // 2
    panel = Image.new("RGB", (width, 10 * height + 40 * unit), _PANEL)
    draw = ImageDraw.Draw(panel)
    x, y, bar_end = unit, unit, width - unit
    for text in _wrap(caption.title, 30):
        draw.text((x, y), text, fill=_MUTED, font=small)
        y += line
    y += r
    draw.text((x, y), f"tick {caption.tick} / {caption.ticks}", fill=_INK, font=big)
    y += line + 4
    _bar(draw, (x, y, bar_end, y + r), caption.tick / max(1, caption.ticks))
    y += unit + 4
    draw.text((x, y), f"checklist {caption.satisfied} / {caption.atoms}", fill=_INK, font=big)
    y += line + 4
    _bar(draw, (x, y, bar_end, y + unit), caption.satisfied / max(1, caption.atoms))
    y += 2 * unit
    for k, agent in enumerate(world.agents):
        colour = AGENT_COLOURS[k % len(AGENT_COLOURS)]
        draw.ellipse((x, y, x + 2 * r, y + 2 * r), fill=colour, outline=_INK)
        draw.text((x + r, y + r), str(k), fill=(255, 255, 255), font=_font(unit - 2), anchor="mm")
        held = world.specs[agent.held].object_type if agent.held >= 0 else "nothing"
        draw.text((x + 3 * r, y - 2), f"agent_{k}", fill=_INK, font=small)
        draw.text((x + 3 * r, y + line - 4), f"holds {held}", fill=_MUTED, font=small)
        y += 2 * line + r
    key = [
        ("floor", "floor"),
        ("receptacle, open", "open"),
        ("receptacle, closed", "closed"),
        ("furniture", "furniture"),
        ("object", "object"),
        ("agent and heading", "agent"),
    ]
    for text, kind in key:
        _key_symbol(draw, (x, y, x + unit, y + unit), kind)
        draw.text((x + unit + r, y - 1), text, fill=_MUTED, font=small)
        y += line
    return panel.crop((0, 0, width, max(height, y + unit)))


def replay_frame(world: World, caption: FrameCaption, map_px: int = FRAME_MAP_PX) -> Image.Image:
    """One frame of a replay: the map of ``world`` (longer side about ``map_px`` pixels) and,
    on its right, the panel of ``caption``, the agents (colour, number, held object) and the
    map's key."""
    ppm = _scale(world, map_px)
    world_map = top_down(world, pixels_per_metre=ppm, agents=False)
    _agents(world_map, world, ppm)
    panel = _panel(world, caption, max(11, map_px // 32), world_map.height)
    frame = Image.new("RGB", (world_map.width + panel.width, panel.height), _PANEL)
    frame.paste(world_map, (0, 0))
    frame.paste(panel, (world_map.width, 0))
    return frame


def _key_symbol(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], kind: str) -> None:
    """The symbol ``top_down`` uses for ``kind``, as its colours are."""
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    if kind == "floor":
        draw.rectangle(box, fill=(222, 222, 214))
    elif kind == "open":
        draw.rectangle(box, outline=(90, 160, 90), width=2)
    elif kind == "closed":
        draw.rectangle(box, outline=(170, 90, 60), width=2)
    elif kind == "furniture":
        draw.rectangle(box, outline=(150, 140, 125), width=2)
    elif kind == "object":
        draw.ellipse((cx - 3, cy - 3, cx + 3, cy + 3), fill=(60, 60, 160))
    else:
        draw.line((cx, cy, x1 + 3, cy), fill=_INK, width=2)
        draw.ellipse((x0, y0, x1 - 3, y1 - 3), fill=AGENT_COLOURS[0], outline=_INK)


def episode_title(trace: dict[str, Any]) -> str:
    """``task, scene, seed s`` of a traced episode."""
    config = trace["config"]
    return f"{config['task']}, {config['scene']}, seed {config['seed']}"


def replay_png(trace: dict[str, Any], tick: int) -> bytes:
    """The PNG of the traced episode after ``tick`` ticks (0: its start), replayed from the
    trace; ValueError when the episode has no such tick."""
    ticks = trace["final"]["ticks"]
    if not 0 <= tick <= ticks:
        raise ValueError(f"tick {tick} is not in [0, {ticks}]")
    states = checklist_states(trace)
    title = episode_title(trace)

    def draw(world: World, t: int) -> Image.Image:
        caption = FrameCaption(title, t, ticks, sum(states[t]), len(states[t]))
        return replay_frame(world, caption)

    (frame,) = replay_worlds(trace, draw, {tick})
    out = io.BytesIO()
    frame.save(out, format="PNG", optimize=True)
    return out.getvalue()


def gif_step(ticks: int, limit: int = MAX_GIF_FRAMES) -> int:
    """A GIF of an episode of ``ticks`` ticks shows every ``gif_step``-th tick (and the last),
    so that at most ``limit`` frames remain."""
    return max(1, math.ceil((ticks + 1) / limit))


def gif_ticks(ticks: int, limit: int = MAX_GIF_FRAMES) -> list[int]:
    """The ticks a GIF of an episode of ``ticks`` ticks shows: every tick from 0 to ``ticks``,
    or every :func:`gif_step`-th and the last, so that at most ``limit`` remain."""
    kept = list(range(0, ticks + 1, gif_step(ticks, limit)))
    if kept[-1] != ticks:
        kept[-1] = ticks  # the final state is always shown
    return kept


def replay_gif(trace: dict[str, Any], ms_per_frame: int = GIF_MS_PER_FRAME) -> bytes:
    """An animated GIF of the traced episode, replayed from its trace: one frame per tick of
    :func:`gif_ticks`, each with its tick counter and the checklist's progress drawn in."""
    ticks = trace["final"]["ticks"]
    states = checklist_states(trace)
    title = episode_title(trace)

    def draw(world: World, t: int) -> Image.Image:
        caption = FrameCaption(title, t, ticks, sum(states[t]), len(states[t]))
        return replay_frame(world, caption, GIF_MAP_PX)

    frames = replay_worlds(trace, draw, set(gif_ticks(ticks)))
    # One palette for every frame, from the first and the last (the map, the agents and the
    # bars are in both): mapping to a given palette is far cheaper than a palette per frame.
    both = Image.new("RGB", (frames[0].width, 2 * frames[0].height))
    both.paste(frames[0], (0, 0))
    both.paste(frames[-1], (0, frames[0].height))
    palette = both.quantize(colors=GIF_COLOURS)
    indexed = [f.quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
    out = io.BytesIO()
    indexed[0].save(
        out, format="GIF", save_all=True, append_images=indexed[1:], duration=ms_per_frame, loop=0
    )
    return out.getvalue()
