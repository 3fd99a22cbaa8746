"""The recipe's report (``REPORT.md``): each stage's wall time summed over invocations, what the
run directories say of the stages, the imitation accuracies and the held-out comparison."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from baselines.rl.recipes.llm_recipe.common import SHORT

TIMING = "timing.json"  # in --out: each stage's wall time, summed over the invocations


@contextmanager
def timed(out: Path, stage: str) -> Iterator[None]:
    """Add the wall time of the block to ``stage``'s in ``<out>/timing.json``: a stage resumed
    across invocations counts each one's time (a finished stage, skipped, adds almost none; an
    invocation killed outright adds nothing for the stage it was in)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        path = out / TIMING
        times = json.loads(path.read_text()) if path.is_file() else {}
        times[stage] = round(times.get(stage, 0.0) + time.perf_counter() - start, 1)
        path.write_text(json.dumps(times, indent=1) + "\n")


def timing_facts(out: Path) -> list[str]:
    """The recorded wall times of ``out`` (:func:`timed`), with their total."""
    path = out / TIMING
    if not path.is_file():
        return []
    times = json.loads(path.read_text())
    spent = ", ".join(f"{stage} {seconds:.0f} s" for stage, seconds in times.items())
    total = sum(times.values())
    return [
        f"Wall time on this machine (summed over invocations): {spent}; total {total / 3600:.2f} h"
    ]


def stage_facts(where: Path) -> list[str]:
    """What the run directories of ``where`` say of the training stages: SFT's
    demonstrations, loss and wall time, each DAgger round's learner, GRPO's steps."""
    facts: list[str] = []
    sft_file = where / "sft" / "sft.json"
    if sft_file.is_file():
        sft = json.loads(sft_file.read_text())
        facts.append(
            f"SFT: {sft['demonstrations_used']} demonstrations, loss "
            f"{sft['epoch_losses'][-1]:.3f}, {sft['seconds']:.0f} s"
        )
    for summary in sorted((where / "dagger").glob("round*.json")):
        r = json.loads(summary.read_text())
        trained = where / "dagger" / f"sft{summary.stem[5:]}" / "sft.json"
        seconds = json.loads(trained.read_text())["seconds"] if trained.is_file() else None
        facts.append(
            f"DAgger {summary.stem}: the learner solved {r['learner_SR']:.2f} of {r['episodes']} "
            f"episodes, {r['labelled']} decisions labelled, agreeing with the teacher on "
            f"{r['agreement']:.2f}" + (f"; trained {seconds:.0f} s" if seconds else "")
        )
    metrics = where / "grpo" / "metrics.jsonl"
    if metrics.is_file():
        train = [m for m in map(json.loads, metrics.open()) if m["kind"] == "train"]
        if train:
            facts.append(
                f"GRPO: {len(train)} steps, {train[-1]['wall_s']:.0f} s, rollout SR "
                f"{sum(m['task/SR'] for m in train) / len(train):.3f}, samples trained "
                f"{sum(int(m.get('charts/samples', 0)) for m in train)}"
            )
    return facts


def report(args: argparse.Namespace, out: Path) -> str:
    from baselines.rl.recipes.imitation import format_table

    lines = [
        "# SmolLM2-135M adapters for the LLM baselines",
        "",
        "Reproduce: `make train-llm` (`python -m baselines.rl.recipes.llm_recipe`, every stage; "
        f"this invocation: `{' '.join(sys.argv[1:]) or 'defaults'}`).",
        "",
        *timing_facts(out),
        "",
    ]
    for baseline in SHORT:
        where = out / baseline
        if not where.is_dir():
            continue
        lines += [f"## {baseline}", "", *(f"- {f}" for f in stage_facts(where)), ""]
        for result in sorted((where / "accuracy").glob("*.json")):
            acc = json.loads(result.read_text())
            lines += [
                f"Imitation accuracy, `{result.stem}` (held-out teacher decisions, teacher SR "
                f"{acc['teacher_SR']:.2f} on {acc['episodes']} episodes):",
                "",
                *format_table(acc["accuracy"]),
                "",
            ]
        compared = where / "eval" / "compare.md"
        if compared.is_file():
            lines += [
                "Held-out comparison (`python -m benchmark.compare`):",
                "",
                compared.read_text(),
                "",
            ]
    return "\n".join(lines)
