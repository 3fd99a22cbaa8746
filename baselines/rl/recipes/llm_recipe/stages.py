"""The training stages, each a public command line run into its own directory under ``--out`` and
skipped when its output is there: SFT, the DAgger rounds, the imitation accuracy, GRPO and the
tiny policy team."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from baselines.rl.recipes.llm_recipe.common import (
    DAGGER_SEED,
    GUARD_SEEDS,
    PLANNER_TASKS,
    PREFIX,
    PROMPT,
    TINY,
    last_json,
    read_jsonl,
    run_module,
    task_list,
)


def lora_overrides(args: argparse.Namespace) -> list[str]:
    """The LoRA placement every llm_agents SFT run uses (``python -m
    baselines.rl.recipes.sft_bench``): rank 16 on the q/v projections of the top 16 of 30
    layers, batch 4."""
    return [
        "init=smollm2",
        "lora=true",
        f"lora_layers={args.lora_layers}",
        f"lora_r={args.lora_r}",
        f"lora_alpha={2 * args.lora_r}",
        "batch_size=4",
        f"lr={args.sft_lr}",
        f"routine_keep={args.routine_keep}",
        f"threads={args.threads}",
        f"bf16={str(args.bf16).lower()}",
        "name=null",
    ]


def sft(baseline: str, args: argparse.Namespace, out: Path) -> None:
    """The SFT adapter ``smollm2-<short>-sft`` (skipped when its run finished)."""
    if (out / "sft" / "sft.json").is_file():
        return
    name = f"{PREFIX[baseline]}-sft"
    if baseline == "llm_agents":
        stage = [
            "format=llm_agents",
            "teacher=heuristic",
            f"prompt={PROMPT}",
            f"tasks={task_list(args.tasks)}",
            f"episodes={args.sft_episodes}",
            "successful_only=true",
            f"epochs={args.sft_epochs}",
            *lora_overrides(args),
        ]
    else:
        stage = [
            "format=llm_planner",
            "teacher=oracle",
            "init=smollm2",
            "lora=true",
            f"tasks={task_list(PLANNER_TASKS)}",
            f"episodes={args.plan_episodes}",
            "successful_only=true",
            "epochs=1",
            "batch_size=4",
            "lr=3e-4",
            "name=null",
        ]
    run_module(
        ["baselines.sft", *stage, f"adapter={name}", f"hydra.run.dir={out / 'sft'}"],
        out / "sft.log",
    )


def dagger_rounds(args: argparse.Namespace, out: Path) -> list[Path]:
    """The DAgger rounds of ``llm_agents`` (each skipped when it finished); the adapter
    directory each round ends with. Round r plays ``--dagger-episodes`` learner episodes
    (training-split scenes, seeds from r x 100,000) with the previous adapter, then trains it
    further on their labelled decisions and ``--dagger-replay`` times as many drawn from the
    earlier ones (the teacher's and earlier rounds')."""
    where = out / "dagger"
    where.mkdir(exist_ok=True)
    previous = out / "sft" / "adapter"
    adapters = []
    for r in range(1, args.dagger_rounds + 1):
        run_dir = where / f"sft{r}"
        data = where / f"round{r}.jsonl"
        if not (run_dir / "sft.json").is_file():
            summary = where / f"round{r}.json"
            if not summary.is_file():
                log = where / f"round{r}.log"
                run_module(
                    [
                        "baselines.rl.recipes.dagger",
                        f"--adapter={previous}",
                        f"--out={data}",
                        "--tasks",
                        *args.tasks,
                        f"--episodes={args.dagger_episodes}",
                        f"--seed-start={r * DAGGER_SEED}",
                        f"--threads={args.threads}",
                        f"--dtype={args.eval_dtype}",
                    ],
                    log,
                )
                summary.write_text(json.dumps(last_json(log), indent=1) + "\n")
            new = read_jsonl(data)
            earlier = read_jsonl(out / "sft" / "demos.jsonl")
            for k in range(1, r):
                earlier += read_jsonl(where / f"round{k}.jsonl")
            rng = random.Random(r)
            replay = min(int(args.dagger_replay * len(new)), len(earlier))
            mixed = new + rng.sample(earlier, replay)
            train = where / f"train{r}.jsonl"
            train.write_text("\n".join(mixed) + "\n")
            last = r == args.dagger_rounds
            run_module(
                [
                    "baselines.sft",
                    "format=llm_agents",
                    f"demos_file={train}",
                    f"init_adapter={previous}",
                    "epochs=1",
                    *lora_overrides(args),
                    f"adapter={PREFIX['llm_agents'] + '-dagger' if last else 'null'}",
                    f"hydra.run.dir={run_dir}",
                ],
                where / f"sft{r}.log",
            )
        previous = run_dir / "adapter"
        adapters.append(previous)
    return adapters


def finished_rounds(args: argparse.Namespace, out: Path) -> list[Path]:
    """The adapters of the DAgger rounds already trained in ``out``, in order."""
    done = []
    for r in range(1, args.dagger_rounds + 1):
        run_dir = out / "dagger" / f"sft{r}"
        if not (run_dir / "sft.json").is_file():
            break
        done.append(run_dir / "adapter")
    return done


def accuracy(args: argparse.Namespace, out: Path, adapters: dict[str, Path | None]) -> None:
    """Imitation accuracy by skill of each model on the held-out teacher decisions
    (``accuracy/<label>.json``; skipped when there)."""
    where = out / "accuracy"
    where.mkdir(exist_ok=True)
    for label, adapter in adapters.items():
        result = where / f"{label}.json"
        if result.is_file() or (adapter is not None and not adapter.is_dir()):
            continue
        log = where / f"{label}.log"
        run_module(
            [
                "baselines.rl.recipes.imitation",
                *([f"--adapter={adapter}"] if adapter else []),
                f"--episodes={args.heldout_episodes}",
                f"--per-skill={args.per_skill}",
                f"--threads={args.threads}",
                f"--dtype={args.eval_dtype}",
            ],
            log,
        )
        result.write_text(json.dumps(last_json(log), indent=1) + "\n")


def grpo(baseline: str, args: argparse.Namespace, out: Path, start: Path | None) -> None:
    """GRPO from the adapter ``start`` (``--grpo-start``, else the last DAgger round's, else
    SFT's): the adapter ``<prefix>-grpo``. Resumes from its checkpoints; skipped when it
    finished."""
    if (out / "grpo" / "final_adapter").is_dir():
        return
    start = args.grpo_start or start or out / "sft" / "adapter"
    if not (start / "adapter_config.json").is_file():
        raise FileNotFoundError(f"GRPO's start {start} is not an adapter directory")
    agents = baseline == "llm_agents"
    lora = (
        [
            f"policy.lora_layers={args.lora_layers}",
            f"policy.lora_r={args.lora_r}",
            f"policy.lora_alpha={2 * args.lora_r}",
            f"rollout.prompt={PROMPT}",
        ]
        if agents
        else []
    )
    run_module(
        [
            "baselines.train",
            "trainer=grpo",
            "policy=smollm2_lora",
            *lora,
            f"policy.adapter={start}",
            f"policy.adapter_out={PREFIX[baseline]}-grpo",
            f"rollout.team={baseline}",
            "rollout.reward_sharing=0.7",
            "rollout.temperature=1.0",
            f"data.tasks={task_list(args.tasks if agents else PLANNER_TASKS)}",
            f"data.seeds_per_step={args.seeds_per_step}",
            f"data.group_size={args.group_size}",
            *([f"rollout.batch_episodes={args.group_size}"] if agents else []),
            f"steps={args.grpo_steps}",
            *_guard_overrides(args),
            "checkpoint_every=1",
            "trainer.lr=1e-4",
            "trainer.minibatch_size=8",
            f"trainer.max_samples={args.max_samples}",
            "logger=console",
            f"threads={args.threads}",
            f"workers={args.workers}",
            "resume=true",
            f"hydra.run.dir={out / 'grpo'}",
        ],
        out / "grpo.log",
    )


def _guard_overrides(args: argparse.Namespace) -> list[str]:
    """The KL guard judges every update by its KL to the start (the adapter GRPO began from) and
    every evaluation by held-out TR, on val-split scenes with seeds of their own (from
    2,000,000: none of the suite's); a failure rolls back. ``--no-guard`` trains without it and
    without evaluations, as the committed ``smollm2-agents-v4-grpo`` was trained."""
    if not args.guard:
        return ["guard.enabled=false", "eval.every=0", "eval.episodes=0"]
    return [
        "guard.enabled=true",
        f"eval.every={args.guard_every}",
        f"eval.episodes={args.guard_episodes}",
        f"eval.seed_start={GUARD_SEEDS}",
        "eval.temperature=0",
    ]


def tiny(args: argparse.Namespace, out: Path) -> None:
    """Does pretraining help? The from-scratch tiny policy team (``baseline=policy``) trained by
    SFT on the same teacher episodes as ``llm_agents``' (same tasks, seeds, solved episodes and
    thinning), in its own view: the policy ``<cache>/policies/sft-tiny-families``, copied by
    :func:`publish` to ``baselines/adapters/policy-tiny-families``."""
    if (out / "tiny" / "sft.json").is_file():
        return
    run_module(
        [
            "baselines.sft",
            "format=rl_view",
            "init=tiny",
            "teacher=heuristic",
            f"tasks={task_list(args.tasks)}",
            f"episodes={args.sft_episodes}",
            "successful_only=true",
            f"routine_keep={args.routine_keep}",
            "epochs=3",
            f"threads={args.threads}",
            f"name={TINY}",
            f"hydra.run.dir={out / 'tiny'}",
        ],
        out / "tiny.log",
    )
