"""The server's own pictures: a metrics plot against the baselines and replay GIFs drawn from
verified traces."""

from __future__ import annotations

import io

from PIL import Image

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.rollout import run_episode
from leaderboard.render import metrics_plot, replay_gif


def _cells(sr: float) -> dict:
    return {m: {"mean": sr, "lo": sr / 2, "hi": min(1.0, sr * 1.5)} for m in ("SR", "TR", "C", "B")}


def test_the_metrics_plot_is_a_png_with_every_series() -> None:
    png = metrics_plot("mine", _cells(0.5), {"oracle": _cells(1.0), "random": _cells(0.1)})
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size == (700, 320)
    colours = {image.getpixel((x, y))[:3] for x in range(0, 700, 5) for y in range(0, 320, 5)}
    assert len(colours) > 6, "bars of several series, not a blank canvas"


def test_a_missing_metric_is_left_out_not_drawn_as_zero() -> None:
    cells = {**_cells(0.5), "B": {"mean": None, "lo": None, "hi": None}}
    assert Image.open(io.BytesIO(metrics_plot("mine", cells, {}))).format == "PNG"


def test_the_replay_gif_has_a_frame_per_tick_of_the_traced_episode() -> None:
    env = make_env("transport_produce_fridge_v0", n_agents=2, seed=0, observability="full")
    trace = run_episode(env, make_team("oracle"), seed=0)
    gif = Image.open(io.BytesIO(replay_gif(trace)))
    assert gif.format == "GIF" and gif.n_frames == trace["final"]["ticks"] + 1
