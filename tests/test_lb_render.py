"""The server's own pictures: the metrics plot (a mean of 0 shows as a marked, labelled bar, and
the legend of eight entries stays outside the axes, checked on the figure's artists and on the
PNG's pixels), and replays drawn from verified traces (a labelled PNG per tick with the tick
counter and the checklist's progress, a GIF of the episode with at most MAX_GIF_FRAMES frames)."""

from __future__ import annotations

import io

import pytest
from helpers.lb_board import verified
from matplotlib.colors import to_rgb
from PIL import Image

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.media.viewer import checklist_states, replay_frames, replay_worlds
from benchmark.rollout import run_episode
from benchmark.sim.render import AGENT_COLOURS, top_down
from leaderboard.server.render import (
    MAX_GIF_FRAMES,
    PLOT_METRICS,
    gif_ticks,
    metrics_figure,
    metrics_plot,
    replay_gif,
    replay_png,
)

LONG = "hierarchical-planner-with-shared-memory-and-replanning-v2"


def _cells(mean: float, lo: float | None = None, hi: float | None = None) -> dict:
    lo = mean / 2 if lo is None else lo
    hi = min(1.0, mean * 1.5) if hi is None else hi
    return {m: {"mean": mean, "lo": lo, "hi": hi} for m in PLOT_METRICS}


def _eight() -> tuple[dict, dict]:
    """A zero entry (SR 0 of 6: [0, 0.46]) beside seven others with long labels."""
    others = {f"#{k} {LONG}-{k}": _cells(0.1 * k + 0.2) for k in range(2, 9)}
    return _cells(0.0, 0.0, 0.46), others


def _png(fig) -> Image.Image:
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return Image.open(io.BytesIO(out.getvalue())).convert("RGB")


def test_the_metrics_plot_is_a_png_with_every_series() -> None:
    png = metrics_plot("mine", _cells(0.5), {"oracle": _cells(1.0), "random": _cells(0.1)})
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (900, 360)
    colours = {image.getpixel((x, y))[:3] for x in range(0, 900, 5) for y in range(0, 360, 5)}
    assert len(colours) > 6, "bars of several series, not a blank canvas"


def test_a_bar_of_zero_is_marked_and_labelled_above_the_axis() -> None:
    zero, others = _eight()
    fig = metrics_figure("#1 zero", zero, others)
    image = _png(fig)
    ax = fig.axes[0]
    width = 0.8 / 8
    zero_colour = tuple(round(255 * c) for c in to_rgb("C0"))
    for m in range(len(PLOT_METRICS)):
        x = m - 3.5 * width  # the first of eight bars of metric m
        px, py = ax.transData.transform((x, 0.0))
        axis_y = ax.transData.transform((x, ax.get_ylim()[0]))[1]
        assert py - axis_y >= 5, "the zero line stands clear of the axis"
        pixel = image.getpixel((round(px), round(image.height - py)))
        assert sum(abs(a - b) for a, b in zip(pixel, zero_colour, strict=True)) < 40, pixel
    labels = [t for t in ax.texts if t.get_text() == "0.00"]
    assert len(labels) == len(PLOT_METRICS), "each zero bar has its value written above it"


def test_the_legend_of_eight_entries_never_covers_the_axes() -> None:
    zero, others = _eight()
    fig = metrics_figure("#1 zero", zero, others)
    fig.draw_without_rendering()
    (legend,) = fig.legends
    box, axes = legend.get_window_extent(), fig.axes[0].get_window_extent()
    assert len(legend.get_texts()) == 8
    assert not box.overlaps(axes), (box, axes)
    assert box.x0 > axes.x1 and fig.bbox.contains(box.x1 - 1, box.y0 + 1)
    labels = [t.get_text() for t in legend.get_texts()]
    assert all(len(label) <= 40 for label in labels) and labels[1].endswith("…")


def test_a_missing_metric_is_left_out_not_drawn_as_zero() -> None:
    cells = {**_cells(0.5), "B": {"mean": None, "lo": None, "hi": None}}
    fig = metrics_figure("mine", cells, {})
    assert [t.get_text() for t in fig.axes[0].texts] == ["0.50"] * 3
    assert Image.open(io.BytesIO(metrics_plot("mine", cells, {}))).format == "PNG"


@pytest.fixture(scope="module")
def trace() -> dict:
    """The heuristic's transport episode of the smoke suite: 88 ticks, messages, atoms done."""
    bundle, _, _ = verified("heuristic")
    run = next(r for r in bundle.rows if not r["reference"])
    return bundle.traces[run["key"]]


def test_the_checklist_states_follow_the_atoms_to_the_final_outcome(trace: dict) -> None:
    states = checklist_states(trace)
    assert len(states) == trace["final"]["ticks"] + 1
    assert list(states[0]) == trace["initially_satisfied"]
    assert list(states[-1]) == trace["final"]["satisfied"]
    first = min(c["tick"] for c in trace["atoms"] if c["satisfied"])
    assert sum(states[first]) == sum(states[0]) and sum(states[first + 1]) == sum(states[0]) + 1


def test_replaying_to_some_ticks_draws_the_same_worlds_as_replaying_them_all(trace: dict) -> None:
    every = replay_frames(trace, pixels_per_metre=20)
    assert len(every) == trace["final"]["ticks"] + 1
    some = replay_worlds(trace, lambda w, t: (t, top_down(w, pixels_per_metre=20)), {0, 5, 30})
    assert [t for t, _ in some] == [0, 5, 30]
    for t, image in some:
        assert image.tobytes() == every[t].tobytes(), t


def _colours(image: Image.Image) -> set[tuple[int, int, int]]:
    return {colour for _, colour in image.getcolors(1 << 24)}


def _panel_colours(image: Image.Image) -> set[tuple[int, int, int]]:
    return _colours(image.crop((image.width * 2 // 3, 0, image.width, image.height)))


def test_a_tick_png_shows_the_map_the_agents_and_the_checklist_filling_up(trace: dict) -> None:
    start = Image.open(io.BytesIO(replay_png(trace, 0))).convert("RGB")
    end = Image.open(io.BytesIO(replay_png(trace, trace["final"]["ticks"])))
    assert start.size == end.size and start.width >= 800, "larger than the old 173 px GIFs"
    colours = _colours(start)
    assert set(AGENT_COLOURS[:2]) <= colours, "both agents drawn in their colours"
    done = (30, 123, 52)  # the progress bars' green
    assert done not in _panel_colours(start), "nothing done at the start"
    assert done in _panel_colours(end.convert("RGB")), "the checklist bar fills up"
    with pytest.raises(ValueError, match=r"tick 89 is not in \[0, 88\]"):
        replay_png(trace, 89)


def test_the_gif_keeps_at_most_its_frame_limit_and_always_the_last_tick() -> None:
    assert gif_ticks(10) == list(range(11))
    long = gif_ticks(1000)
    assert len(long) <= MAX_GIF_FRAMES and long[0] == 0 and long[-1] == 1000
    assert gif_ticks(MAX_GIF_FRAMES - 1) == list(range(MAX_GIF_FRAMES))


def test_the_replay_gif_has_a_frame_per_tick_of_the_traced_episode() -> None:
    env = make_env("transport_produce_fridge_v0", n_agents=2, seed=0, observability="full")
    trace = run_episode(env, make_team("oracle"), seed=0)
    gif = Image.open(io.BytesIO(replay_gif(trace)))
    assert gif.format == "GIF" and gif.n_frames == trace["final"]["ticks"] + 1
    assert gif.width > 400, "a map with its panel of tick counter, checklist and key"
