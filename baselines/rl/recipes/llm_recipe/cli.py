"""The recipe's command line: its stages, each stage's budget, and the order it runs them in."""

from __future__ import annotations

import argparse
from pathlib import Path

from baselines.llm_support import ADAPTERS_DIR
from baselines.rl.recipes.llm_recipe.common import FAMILY_TASKS, SHORT, STAGES
from baselines.rl.recipes.llm_recipe.evaluation import evaluate_all
from baselines.rl.recipes.llm_recipe.publish import publish
from baselines.rl.recipes.llm_recipe.report import report, timed
from baselines.rl.recipes.llm_recipe.stages import (
    accuracy,
    dagger_rounds,
    finished_rounds,
    grpo,
    sft,
    tiny,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The recipe's command line: its stages and each stage's budget."""
    parser = argparse.ArgumentParser(
        prog="python -m baselines.rl.recipes.llm_recipe",
        description="Train the embedded SmolLM2 for the LLM baselines on CPU, and report it "
        "(make train-llm). Resumable: run it again and it goes on from what it finished.",
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/llm_recipe"))
    parser.add_argument("--only", nargs="+", default=list(SHORT), choices=list(SHORT))
    parser.add_argument("--tasks", nargs="+", default=list(FAMILY_TASKS), help="llm_agents")
    parser.add_argument("--sft-episodes", type=int, default=240, help="heuristic episodes")
    parser.add_argument("--routine-keep", type=float, default=0.25, help="explore/wait kept")
    parser.add_argument("--sft-epochs", type=int, default=1)
    parser.add_argument("--sft-lr", type=float, default=5e-4)
    parser.add_argument("--lora-layers", type=int, default=16)
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument(
        "--bf16", action=argparse.BooleanOptionalAction, default=True, help="SFT matmuls in bf16"
    )
    parser.add_argument("--dagger-rounds", type=int, default=2)
    parser.add_argument("--dagger-episodes", type=int, default=12, help="learner episodes")
    parser.add_argument("--dagger-replay", type=float, default=0.5, help="earlier data share")
    parser.add_argument("--heldout-episodes", type=int, default=39, help="accuracy: teacher")
    parser.add_argument("--per-skill", type=int, default=40, help="accuracy: decisions a skill")
    parser.add_argument("--plan-episodes", type=int, default=40, help="oracle episodes")
    # GRPO's budget: 2 seeds x a group of 8 rollouts (played 8 at a time, calls batched) per
    # update, trained on a subsample of their decisions.
    parser.add_argument("--grpo-steps", type=int, default=6)
    parser.add_argument("--seeds-per-step", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-samples", type=int, default=256, help="GRPO samples per update")
    parser.add_argument(
        "--grpo-start", type=Path, help="GRPO's start adapter (default: the last DAgger round's)"
    )
    parser.add_argument(
        "--guard",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="GRPO under the KL guard (--no-guard: as the committed -grpo adapter was trained)",
    )
    parser.add_argument("--guard-every", type=int, default=3, help="GRPO updates an evaluation")
    parser.add_argument("--guard-episodes", type=int, default=26, help="episodes an evaluation")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--suite", default="llm_heldout", help="llm_agents' held-out suite")
    parser.add_argument(
        "--eval-dtype",
        default="bfloat16",
        help="llm_agents' weights when it plays (DAgger, accuracy, evaluation)",
    )
    parser.add_argument(
        "--stages", nargs="+", default=list(STAGES), choices=list(STAGES), help="what to run"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out.resolve()
    for baseline in args.only:
        where = out / baseline
        where.mkdir(parents=True, exist_ok=True)
        short = SHORT[baseline]
        if "sft" in args.stages:
            with timed(out, f"{short}/sft"):
                sft(baseline, args, where)
        rounds = finished_rounds(args, where)  # GRPO starts from the last, run or not here
        if baseline == "llm_agents" and "dagger" in args.stages:
            with timed(out, f"{short}/dagger"):
                rounds = dagger_rounds(args, where)
        if baseline == "llm_agents" and "accuracy" in args.stages:
            models: dict[str, Path | None] = {"base": None, "sft": where / "sft" / "adapter"}
            models.update({f"dagger{k + 1}": a for k, a in enumerate(rounds)})
            with timed(out, f"{short}/accuracy"):
                accuracy(args, where, models)
        if "grpo" in args.stages:
            with timed(out, f"{short}/grpo"):
                grpo(baseline, args, where, rounds[-1] if rounds else None)
        if baseline == "llm_agents" and "tiny" in args.stages:
            with timed(out, f"{short}/tiny"):
                tiny(args, where)
        print(f"adapters in {ADAPTERS_DIR}: {', '.join(publish(baseline, where)) or 'none yet'}")
        if "eval" in args.stages:
            with timed(out, f"{short}/eval"):
                evaluate_all(baseline, args, where)
    text = report(args, out)
    for folder in (out, ADAPTERS_DIR):
        (folder / "REPORT.md").write_text(text)
    print(text)
    return 0
