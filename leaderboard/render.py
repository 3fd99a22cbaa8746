"""Pictures the server draws itself: an entry's metrics against the baselines of its track
(matplotlib, PNG) and replays of its episodes (GIF, from the verified traces; never an uploaded
image)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: draw to memory

import matplotlib.pyplot as plt

from benchmark.viewer import replay_frames

PLOT_METRICS = ("SR", "TR", "C", "B")  # fractions in [0, 1], drawn on one axis
MAX_GIF_FRAMES = 400


def metrics_plot(
    entry: str,
    cells: Mapping[str, Mapping[str, Any]],
    baselines: Mapping[str, Mapping[str, Mapping[str, Any]]],
    metrics: Sequence[str] = PLOT_METRICS,
) -> bytes:
    """A PNG bar chart: per metric, the entry's mean and 95% interval beside each baseline's.

    Args:
        entry: the entry's label.
        cells: metric -> ``{"mean", "lo", "hi"}`` of the entry (its summary's ``all`` family).
        baselines: label -> such cells, for the baselines of the same track.
        metrics: the metrics to draw (fractions).
    """
    series = {entry: cells, **{k: v for k, v in baselines.items() if k != entry}}
    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
    width = 0.8 / max(1, len(series))
    for s, (label, values) in enumerate(series.items()):
        xs, means, errors = [], [], [[], []]
        for m, name in enumerate(metrics):
            cell = values.get(name) or {}
            if cell.get("mean") is None:
                continue
            xs.append(m + (s - (len(series) - 1) / 2) * width)
            means.append(cell["mean"])
            # A bound of 0.0 is a bound: only a missing one (None) draws no bar.
            lo = cell["mean"] if cell.get("lo") is None else cell["lo"]
            hi = cell["mean"] if cell.get("hi") is None else cell["hi"]
            errors[0].append(max(0.0, cell["mean"] - lo))
            errors[1].append(max(0.0, hi - cell["mean"]))
        ax.bar(xs, means, width, yerr=errors, capsize=2, label=label)
    ax.set_xticks(range(len(metrics)), metrics)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean, 95% interval")
    ax.legend(fontsize=7, loc="upper right", ncols=2)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def replay_gif(trace: dict[str, Any], ms_per_frame: int = 120, pixels_per_metre: int = 30) -> bytes:
    """An animated GIF of the episode, replayed from its trace (one frame per tick; long
    episodes keep every k-th frame so that at most :data:`MAX_GIF_FRAMES` remain)."""
    frames = replay_frames(trace, pixels_per_metre=pixels_per_metre)
    step = -(-len(frames) // MAX_GIF_FRAMES)
    frames = frames[::step]
    out = io.BytesIO()
    frames[0].save(
        out, format="GIF", save_all=True, append_images=frames[1:], duration=ms_per_frame, loop=0
    )
    return out.getvalue()
