"""The CPU learning recipe end to end: SFT warm start, then GRPO, PPO and SPPO from it under
the same wall-clock budget, then the report and curves.

    python -m baselines.rl.recipes.recipe                      # 30 minutes per trainer
    python -m baselines.rl.recipes.recipe --minutes 5 --trainers grpo --out outputs/rl_quick
    python -m baselines.rl.recipes.recipe --trainers grpo sppo sppo_per_decision \
        --tasks transport_apple_fridge_v0 transport_produce_fridge_v0

``--trainers`` names configs of ``configs/trainer/`` (``sppo_per_decision`` is SPPO with its
earlier per-decision target); ``--tasks`` sets the tasks of the SFT demonstrations, of
training and of the held-out evaluations (default: the training config's).

Each stage is the public command line (``baselines.sft``, ``baselines.train``), so the run
directories are ordinary training runs that resume if the recipe is interrupted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from baselines.rl.recipes.evaluate import evaluate_policy, format_row, training_config
from baselines.rl.recipes.report import write_report


def _run(args: list[str]) -> None:
    print("$", " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", *args], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/rl_recipe"))
    parser.add_argument("--minutes", type=float, default=30.0, help="budget per trainer")
    parser.add_argument("--trainers", nargs="+", default=["grpo", "ppo", "sppo"])
    parser.add_argument(
        "--steps",
        type=int,
        default=100_000,
        help="update steps per trainer (the budget ends first)",
    )
    parser.add_argument("--tasks", nargs="+", default=None, help="task ids (SFT, training, eval)")
    parser.add_argument("--sft-episodes", type=int, default=400)
    parser.add_argument("--sft-epochs", type=int, default=3)
    parser.add_argument("--name", default="sft-tiny", help="the SFT policy's name")
    parser.add_argument("--skip-sft", action="store_true", help="reuse the saved SFT policy")
    parser.add_argument(
        "--final-suite",
        default="",
        help="a runner suite (configs/suite) for the final check instead of --final-episodes",
    )
    parser.add_argument(
        "--final-episodes",
        type=int,
        default=200,
        help="held-out episodes of the final check (0: none)",
    )
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every trainer")
    args = parser.parse_intermixed_args(argv)  # overrides may follow options
    out = args.out.resolve()
    # A recipe that stopped after its SFT resumes without redoing it.
    sft_done = (out / "sft" / "model").is_dir()
    if sft_done and not args.skip_sft:
        print(f"SFT already done: {out / 'sft' / 'model'}", flush=True)
    tasks = [f"data.tasks=[{','.join(args.tasks)}]"] if args.tasks else []
    if not args.skip_sft and not sft_done:
        _run(
            [
                "baselines.sft",
                f"episodes={args.sft_episodes}",
                f"epochs={args.sft_epochs}",
                f"name={args.name}",
                f"hydra.run.dir={out / 'sft'}",
                *([f"tasks=[{','.join(args.tasks)}]"] if args.tasks else []),
            ]
        )
    # The trainers start from this recipe's SFT model (its copy under --name may be replaced
    # by a later recipe), or from the saved policy --name with --skip-sft.
    init = args.name if args.skip_sft else str(out / "sft" / "model")
    runs = []
    for trainer in args.trainers:
        run = out / trainer
        _run(
            [
                "baselines.train",
                f"trainer={trainer}",
                f"policy.init={init}",
                f"steps={args.steps}",
                f"max_minutes={args.minutes}",
                f"hydra.run.dir={run}",
                *tasks,
                *args.overrides,
            ]
        )
        runs.append(run)
    write_report(runs, out)
    print((out / "report.md").read_text())
    # Outside the training budget: the start and every trained policy on the same, larger
    # held-out set (the first run's eval settings) through the runner, with exact intervals.
    if args.final_episodes < 1:
        return 0
    options = {
        "episodes": args.final_episodes,
        "suite": args.final_suite or None,
        "train": training_config(runs[0] / "config.yaml" if runs else None),
    }
    final = evaluate_policy(init, out / "final_eval" / "sft", **options)
    for run in runs:
        final += evaluate_policy(str(run / "final_model"), out / "final_eval" / run.name, **options)
    (out / "final_eval.json").write_text(json.dumps(final, indent=1))
    for row in final:
        print(format_row(row))
    print(f"curves: {out / 'curves.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
