"""Summaries and learning curves of training runs, read from their ``metrics.jsonl``.

``python -m baselines.rl.recipes.report <run_dir> [<run_dir> ...] --out <dir>`` writes
``report.md``, ``report.json`` and ``curves.png`` (held-out SR by step, and the training SR
smoothed).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from benchmark.results.markdown import markdown_table

COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14)]


def read_rows(run: Path) -> list[dict[str, Any]]:
    path = run / "metrics.jsonl"
    if not path.is_file():
        raise ValueError(f"{run} holds no metrics.jsonl (not a training run directory)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarize_run(run: Path) -> dict[str, Any]:
    """First and last held-out evaluation, steps and wall time of one run."""
    rows = read_rows(run)
    evals = [r for r in rows if r["kind"] == "eval"]
    train = [r for r in rows if r["kind"] == "train"]
    if not evals:
        raise ValueError(f"{run}: no evaluation rows")
    first, last = evals[0], evals[-1]
    name = run.name

    def pick(row: dict[str, Any], key: str) -> float | None:
        return row.get(f"eval/{key}")

    return {
        "run": name,
        "steps": last["step"],
        "wall_min": round(max(r["wall_s"] for r in rows) / 60, 1),
        "SR_before": pick(first, "task/SR"),
        "SR_after": pick(last, "task/SR"),
        "TR_after": pick(last, "task/TR"),
        "B_after": pick(last, "collab/B"),
        "redundancy_after": pick(last, "collab/redundancy"),
        "messages_after": pick(last, "comm/messages"),
        "L_after": pick(last, "task/L"),
        "curve": [(r["step"], r.get("eval/task/SR")) for r in evals],
        "train_curve": [(r["step"], r.get("task/SR")) for r in train],
    }


def _smooth(points: list[tuple[int, float | None]], k: int = 5) -> list[tuple[int, float]]:
    clean = [(s, v) for s, v in points if v is not None]
    out = []
    for i in range(len(clean)):
        window = [v for _, v in clean[max(0, i - k + 1) : i + 1]]
        out.append((clean[i][0], sum(window) / len(window)))
    return out


def plot_curves(summaries: list[dict[str, Any]], path: Path, size: tuple[int, int] = (720, 420)):
    """Held-out SR (solid) and smoothed training SR (thin) against the step."""
    w, h = size
    left, right, top, bottom = 60, 160, 30, 50
    img = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(img)
    max_step = max([1] + [p[0] for s in summaries for p in s["curve"] + s["train_curve"]])

    def xy(step: float, value: float) -> tuple[float, float]:
        x = left + (w - left - right) * step / max_step
        y = h - bottom - (h - top - bottom) * value
        return x, y

    draw.rectangle([left, top, w - right, h - bottom], outline="black")
    for k in range(6):
        v = k / 5
        draw.line([xy(0, v), (w - right, xy(0, v)[1])], fill=(225, 225, 225))
        draw.text((left - 30, xy(0, v)[1] - 6), f"{v:.1f}", fill="black")
    draw.text((left, h - bottom + 20), f"step (0..{max_step})", fill="black")
    draw.text((left, 8), "success rate: held-out (thick), training (thin, smoothed)", fill="black")
    for k, s in enumerate(summaries):
        colour = COLOURS[k % len(COLOURS)]
        held = [xy(x, v) for x, v in s["curve"] if v is not None]
        train = [xy(x, v) for x, v in _smooth(s["train_curve"])]
        if len(train) > 1:
            draw.line(train, fill=colour, width=1)
        if len(held) > 1:
            draw.line(held, fill=colour, width=3)
        for p in held:
            draw.ellipse([p[0] - 3, p[1] - 3, p[0] + 3, p[1] + 3], fill=colour)
        draw.text((w - right + 10, top + 18 * k), s["run"], fill=colour)
    img.save(path)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def write_report(runs: list[Path], out: Path) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    summaries = [summarize_run(r) for r in runs]
    columns = [
        "run",
        "steps",
        "wall_min",
        "SR_before",
        "SR_after",
        "TR_after",
        "B_after",
        "redundancy_after",
        "messages_after",
        "L_after",
    ]
    lines = markdown_table(columns, [[_cell(s[c]) for c in columns] for s in summaries])
    (out / "report.md").write_text("\n".join(lines) + "\n")
    (out / "report.json").write_text(json.dumps(summaries, indent=1))
    plot_curves(summaries, out / "curves.png")
    return summaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Summarise training runs and plot curves.")
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("outputs/rl_report"))
    args = parser.parse_args(argv)
    write_report(args.runs, args.out)
    print((args.out / "report.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
