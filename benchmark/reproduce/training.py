"""A table's training stage: the command that trains its policies, and their learning curves.

The command is ``python -m <module> <args>`` in a child process (``{out}`` in the args is the
training's directory, ``<runs>/<training.out>``); it is skipped when its ``done`` file is
already there, so a reproduction that stopped after training does not train again. The
curves are the held-out evaluations each training run logged in its ``metrics.jsonl``
(``kind: eval`` rows, with ``eval/episodes``): success rate against the update step, with the
Clopper-Pearson 95% interval of the episodes it is over. They are committed beside the bundles
as ``<reference_dir>/<table>.curves.jsonl`` (one line per evaluation, its series named) and
written with the table as ``<table>.curves.csv`` and ``<table>.curves.png``.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmark.metrics.specs import BY_NAME
from benchmark.reproduce.render import outside_legend, series_colour
from benchmark.reproduce.sources import SourceError
from benchmark.reproduce.spec import TableSpec, TrainingSpec
from benchmark.results.summary import interval_cell

CURVE_KEYS = ("step", "wall_s", "eval/episodes", "eval/task/SR")
Curve = dict[str, Any]


def training_command(spec: TrainingSpec, out: Path, short: bool) -> list[str]:
    args = [str(out) if a == "{out}" else a for a in spec.args]
    return [sys.executable, "-m", spec.module, *args, *(spec.short if short else ())]


def run_training(spec: TrainingSpec, out: Path, short: bool) -> None:
    """Train into ``out`` unless its ``done`` file says it has; SourceError when it fails."""
    if (out / spec.done).exists():
        print(f"[reproduce] training: {out / spec.done} exists, not training again", flush=True)
        return
    out.mkdir(parents=True, exist_ok=True)
    command = training_command(spec, out, short)
    print(f"[reproduce] training: {' '.join(command[1:])}", flush=True)
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise SourceError(f"training failed (exit {done.returncode}): {' '.join(command)}")
    if not (out / spec.done).exists():
        raise SourceError(f"training finished without writing {out / spec.done}")


def read_curves(spec: TrainingSpec, out: Path) -> list[Curve]:
    """The held-out evaluations of every curve's training run under ``out``, series named."""
    curves = []
    for label, run in spec.curves:
        path = out / run / "metrics.jsonl"
        if not path.is_file():
            raise SourceError(f"curve {label!r}: no {path} (was the training run?)")
        for n, line in enumerate(path.read_text().splitlines(), 1):
            row = json.loads(line) if line.strip() else {}
            if row.get("kind") != "eval":
                continue
            missing = [k for k in CURVE_KEYS if k not in row]
            if missing:
                raise SourceError(f"{path}:{n}: evaluation row without {missing}")
            curves.append({"series": label, **{k: row[k] for k in CURVE_KEYS}})
    return curves


def curves_path(table: TableSpec, reference_dir: Path) -> Path:
    return reference_dir / f"{table.name}.curves.jsonl"


def save_curves(curves: list[Curve], path: Path) -> Path:
    path.write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in curves))
    return path


def load_curves(path: Path) -> list[Curve]:
    if not path.is_file():
        raise SourceError(f"no committed curves {path}")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def curve_cell(curve: Curve) -> dict[str, Any]:
    """The evaluation's SR with its exact interval (from its success count)."""
    n = int(curve["eval/episodes"])
    wins = round(curve["eval/task/SR"] * n)
    return interval_cell([1.0] * wins + [0.0] * (n - wins), BY_NAME["SR"])


def write_curves(out_dir: Path, table: TableSpec, curves: list[Curve]) -> list[Path]:
    """``<table>.curves.csv`` (series, step, minutes, episodes, SR and its interval) and the
    plot ``<table>.curves.png``."""
    if table.training is None:
        raise ValueError(f"table {table.name} has no training, hence no curves")
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_file = out_dir / f"{table.name}.curves.csv"
    cells = [(c, curve_cell(c)) for c in curves]
    with csv_file.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["series", "step", "minutes", "episodes", "SR_mean", "SR_lo", "SR_hi"])
        for c, cell in cells:
            writer.writerow(
                [
                    c["series"],
                    c["step"],
                    round(c["wall_s"] / 60, 2),
                    c["eval/episodes"],
                    *("" if cell[p] is None else round(cell[p], 9) for p in ("mean", "lo", "hi")),
                ]
            )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    for i, (label, _) in enumerate(table.training.curves):
        mine = [
            (c["step"], cell)
            for c, cell in cells
            if c["series"] == label and cell["mean"] is not None
        ]
        if not mine:
            continue
        steps = [s for s, _ in mine]
        colour = series_colour(table, label, i)
        ax.plot(steps, [cell["mean"] for _, cell in mine], marker="o", label=label, color=colour)
        lo = [cell["lo"] for _, cell in mine]
        hi = [cell["hi"] for _, cell in mine]
        ax.fill_between(steps, lo, hi, alpha=0.2, color=colour)
    ax.set_xlabel("update step")
    ax.set_ylabel("held-out SR (95% exact interval)")
    ax.set_ylim(0, 1)
    ax.set_title(f"{table.title}: learning curves")
    outside_legend(ax)
    fig.tight_layout()
    png = out_dir / f"{table.name}.curves.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return [csv_file, png]
