"""Train the embedded SmolLM2 for the LLM baselines on CPU, and report it. Resumable: run it
again after an interruption and it goes on from the last stage (and step) it finished.

    python -m baselines.rl.recipes.llm_recipe                    # or: make train-llm
    python -m baselines.rl.recipes.llm_recipe --only llm_agents --stages sft accuracy

``llm_agents`` learns from the ``heuristic`` team, in its ``llm_agents_v4`` prompt (the agent's
memory), on the tasks of three families (transport, switch-off, search; ``FAMILY_TASKS``),
training-split scenes:

1. ``sft``: ``python -m baselines.sft format=llm_agents lora=true ...`` on the teacher's
   decisions in the episodes it solved, a quarter of the routine ones (``explore``, ``wait``)
   kept: the adapter ``smollm2-agents-v4-sft``;
2. ``dagger`` (rounds): ``python -m baselines.rl.recipes.dagger`` plays the learner and labels the
   states it reaches with the teacher's decisions, then ``baselines.sft demos_file=...
   init_adapter=<previous>`` trains on those with half as many earlier demonstrations: the adapter
   ``smollm2-agents-v4-dagger``;
3. ``accuracy``: after each of them, ``python -m baselines.rl.recipes.imitation`` (accuracy by skill
   on held-out teacher decisions, val-split scenes);
4. ``grpo``: ``python -m baselines.train trainer=grpo rollout.team=llm_agents ...`` from the
   last adapter (reward sharing alpha 0.7, groups by episode seed, the KL guard on: KL to the
   start adapter per update, held-out TR every ``--guard-every`` updates on val-split scenes
   with seeds of their own): ``smollm2-agents-v4-grpo``;
5. ``tiny``: the from-scratch tiny policy team trained by SFT on the same teacher episodes
   (does pretraining help?);
6. ``eval``: ``python -m benchmark.run baseline=llm_agents llm=smollm2 suite=<--suite>`` per
   model (greedy), the teacher, the tiny team and the last model with messages off, all on the
   same held-out val-scene episodes; then ``python -m benchmark.compare`` for each question
   (``COMPARISONS``: paired SR differences with exact McNemar p-values).

``llm_planner`` learns the ``oracle``'s plans (``sft``), then ``grpo`` and ``eval``.

Each finished stage's adapter is copied to ``baselines/adapters/<prefix>-<stage>`` (what
``llm.adapter=<name>`` loads; ``<prefix>``: ``smollm2-agents-v4`` or ``smollm2-planner``;
``<stage>``: sft, dagger, grpo; GRPO's with its log, ``training.jsonl``), the
report (``REPORT.md``: the stages' wall times, imitation accuracies and the comparison table
with exact 95% intervals on SR) to ``baselines/adapters/`` and ``--out``. Each stage's wall
time is added up over the invocations in ``--out/timing.json``, so a run interrupted and
resumed still reports what it took in all. Every stage is a
public command line whose run directory is kept under ``--out``; a stage whose output is there
is not run again.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from baselines.llm_support import ADAPTERS_DIR

# The training tasks of three families, interleaved (episode k plays task k mod 13).
FAMILY_TASKS = (
    "transport_apple_fridge_v0",
    "switch_off_bedroom_v0",
    "search_phone_bedroom_v0",
    "transport_produce_fridge_v0",
    "switch_off_kitchen_v0",
    "search_produce_kitchen_v0",
    "transport_dishes_sink_v0",
    "switch_off_bathroom_v0",
    "search_toiletries_bathroom_v0",
    "transport_bed_tidy_v0",
    "switch_off_living_room_v0",
    "search_valuables_living_room_v0",
    "transport_sofa_tidy_v0",
)
PLANNER_TASKS = ("transport_apple_fridge_v0", "switch_off_bedroom_v0", "search_phone_bedroom_v0")
SHORT = {"llm_agents": "agents", "llm_planner": "planner"}
# The committed adapters' names: <prefix>-<stage>. llm_agents' are those of the v4 prompt (the
# earlier smollm2-agents-* adapters, v3, stay as the runs of the committed tables made them).
PREFIX = {"llm_agents": "smollm2-agents-v4", "llm_planner": "smollm2-planner"}
TEACHER = {"llm_agents": "heuristic", "llm_planner": "oracle"}
STAGES = ("sft", "dagger", "accuracy", "grpo", "tiny", "eval")
TINY = "sft-tiny-families"  # the tiny policy team trained on llm_agents' teacher episodes
TINY_DIR = "policy-tiny-families"  # its committed model directory in baselines/adapters/
PROMPT = "llm_agents_v4"
DAGGER_SEED = 100_000  # round r plays training-split seeds from r * DAGGER_SEED
GUARD_SEEDS = 2_000_000  # GRPO's guard evaluates val-split seeds from here (not llm_heldout's)


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


def _run(args: list[str], log: Path) -> float:
    """Run ``python -m <args>``; its wall time (s). Output is appended to ``log``."""
    print("$ python -m", " ".join(args), flush=True)
    start = time.perf_counter()
    with log.open("a") as f:
        command = [sys.executable, "-m", *args]
        subprocess.run(command, check=True, stdout=f, stderr=subprocess.STDOUT)
    return round(time.perf_counter() - start, 1)


def _last_json(log: Path) -> dict[str, Any]:
    """The last line of ``log`` that is a JSON object (what a stage printed as its result)."""
    for line in reversed(log.read_text().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"{log} holds no result line")


def _tasks(tasks: list[str] | tuple[str, ...]) -> str:
    return "[" + ",".join(tasks) + "]"


def _lora(args: argparse.Namespace) -> list[str]:
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
            f"tasks={_tasks(args.tasks)}",
            f"episodes={args.sft_episodes}",
            "successful_only=true",
            f"epochs={args.sft_epochs}",
            *_lora(args),
        ]
    else:
        stage = [
            "format=llm_planner",
            "teacher=oracle",
            "init=smollm2",
            "lora=true",
            f"tasks={_tasks(PLANNER_TASKS)}",
            f"episodes={args.plan_episodes}",
            "successful_only=true",
            "epochs=1",
            "batch_size=4",
            "lr=3e-4",
            "name=null",
        ]
    _run(
        ["baselines.sft", *stage, f"adapter={name}", f"hydra.run.dir={out / 'sft'}"],
        out / "sft.log",
    )


def _read_jsonl(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


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
                _run(
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
                summary.write_text(json.dumps(_last_json(log), indent=1) + "\n")
            new = _read_jsonl(data)
            earlier = _read_jsonl(out / "sft" / "demos.jsonl")
            for k in range(1, r):
                earlier += _read_jsonl(where / f"round{k}.jsonl")
            rng = random.Random(r)
            replay = min(int(args.dagger_replay * len(new)), len(earlier))
            mixed = new + rng.sample(earlier, replay)
            train = where / f"train{r}.jsonl"
            train.write_text("\n".join(mixed) + "\n")
            last = r == args.dagger_rounds
            _run(
                [
                    "baselines.sft",
                    "format=llm_agents",
                    f"demos_file={train}",
                    f"init_adapter={previous}",
                    "epochs=1",
                    *_lora(args),
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
        _run(
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
        result.write_text(json.dumps(_last_json(log), indent=1) + "\n")


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
    _run(
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
            f"data.tasks={_tasks(args.tasks if agents else PLANNER_TASKS)}",
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
    _run(
        [
            "baselines.sft",
            "format=rl_view",
            "init=tiny",
            "teacher=heuristic",
            f"tasks={_tasks(args.tasks)}",
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


def evaluate(label: str, team: list[str], args: argparse.Namespace, out: Path) -> Path:
    """Play the held-out suite with one team (``team``: its overrides of ``benchmark.run``)
    into ``eval/<label>``; a run already there goes on from the episodes it has."""
    run_dir = out / "eval" / label
    run_dir.parent.mkdir(exist_ok=True)
    _run(
        [
            "benchmark.run",
            *team,
            f"workers={args.workers}",
            "reference=false",
            "comm=[true]",
            "logger.console=false",
            f"output_dir={run_dir}",
        ],
        out / "eval" / f"{label}.log",
    )
    return run_dir


def _smollm2(baseline: str, adapter: Path | None, args: argparse.Namespace) -> list[str]:
    """``benchmark.run``'s overrides for the SmolLM2 team with ``adapter`` (None: base)."""
    agents = baseline == "llm_agents"
    return [
        f"baseline={baseline}",
        "llm=smollm2",
        f"llm.adapter={adapter or 'null'}",
        *([f"baseline.kwargs.prompt={PROMPT}", "batch_episodes=6"] if agents else []),
        *([f"+llm.options.dtype={args.eval_dtype}"] if agents else []),
        f"suite={args.suite if agents else 'llm_val'}",
    ]


# What each comparison of the report asks: its runs (the first is the reference) and the
# options of benchmark.compare.
COMPARISONS = (
    ("Each training stage against the base model", ("base", "sft", "dagger", "grpo"), ()),
    ("GRPO against its start (the last DAgger round)", ("dagger", "grpo"), ()),
    ("The trained team against its teacher", ("teacher", "grpo"), ()),
    ("Pretraining: the tiny policy team on the same data", ("tiny", "grpo"), ()),
    (
        "What it learned to say: messages on against off",
        ("grpo", "grpo-comm-off"),
        ("--across-comm",),
    ),
)


def evaluate_all(baseline: str, args: argparse.Namespace, where: Path) -> str:
    """Every model of the comparison on the same held-out episodes, then
    ``python -m benchmark.compare`` over them (``COMPARISONS``, for ``llm_agents``; for
    ``llm_planner`` each stage against the base model): their tables (markdown), also written
    to ``eval/compare.md``. The last trained model and its start are played first, the base
    model (whose episodes run to the step limit) last."""
    stages: dict[str, Path | None] = {"base": None, "sft": where / "sft" / "adapter"}
    rounds = finished_rounds(args, where) if baseline == "llm_agents" else []
    if rounds:
        stages["dagger"] = rounds[-1]
    if (where / "grpo" / "final_adapter").is_dir():
        stages["grpo"] = where / "grpo" / "final_adapter"
    teams = {k: _smollm2(baseline, a, args) for k, a in stages.items() if a is None or a.is_dir()}
    last = list(teams)[-1]
    if baseline == "llm_agents":
        held_out = f"suite={args.suite}"
        tiny_dir = where / "tiny" / "model"
        teams = {
            "teacher": ["baseline=heuristic", "llm=none", held_out],
            **(
                {"tiny": ["baseline=policy", f"baseline.checkpoint={tiny_dir}", held_out]}
                if (where / "tiny" / "sft.json").is_file()
                else {}
            ),
            **dict(reversed(teams.items())),
        }
        if last != "base":
            teams[f"{last}-comm-off"] = [*teams[last], "comm=[false]"]
    runs = {label: evaluate(label, team, args, where) for label, team in teams.items()}
    if baseline == "llm_agents":
        asked = [(t, [n.replace("grpo", last) for n in names], o) for t, names, o in COMPARISONS]
    else:
        asked = [("Each training stage against the base model", list(stages), ())]
    sections = []
    for k, (title, names, options) in enumerate(asked):
        present = [runs[n] for n in dict.fromkeys(names) if n in runs]
        if len(present) < 2:
            continue
        log = where / "eval" / f"compare{k}.log"
        log.unlink(missing_ok=True)
        _run(
            [
                "benchmark.compare",
                *map(str, present),
                *options,
                "--json",
                str(where / "eval" / f"compare{k}.json"),
            ],
            log,
        )
        sections += [f"### {title}", "", log.read_text().strip(), ""]
    text = "\n".join(sections)
    (where / "eval" / "compare.md").write_text(text)
    return text


def publish(baseline: str, where: Path) -> list[str]:
    """Copy each finished stage's adapter to ``baselines/adapters/<prefix>-<stage>`` (what
    ``llm.adapter=<name>`` loads), and the tiny policy team's model (with its ``sft.json`` as
    ``training.json``, its weights in bfloat16) to ``baselines/adapters/policy-tiny-families``;
    the names copied."""
    rounds = sorted((where / "dagger").glob("sft*/adapter")) if (where / "dagger").is_dir() else []
    stages = {
        "sft": where / "sft" / "adapter",
        "dagger": rounds[-1] if rounds else None,
        "grpo": where / "grpo" / "final_adapter",
    }
    targets = {ADAPTERS_DIR / f"{PREFIX[baseline]}-{stage}": s for stage, s in stages.items()}
    tiny_model = where / "tiny" / "model"
    if baseline == "llm_agents" and (where / "tiny" / "sft.json").is_file():
        targets[ADAPTERS_DIR / TINY_DIR] = tiny_model
    copied = []
    for target, source in targets.items():
        if source is None or not (
            (source / "adapter_config.json").is_file() or (source / "config.json").is_file()
        ):
            continue
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target)
        if source == tiny_model:
            shutil.copy2(where / "tiny" / "sft.json", target / "training.json")
            _to_bfloat16(target / "model.safetensors")
        if source == stages["grpo"] and (where / "grpo" / "metrics.jsonl").is_file():
            # GRPO's log travels with its adapter: every update's rollout and guard figures.
            shutil.copy2(where / "grpo" / "metrics.jsonl", target / "training.jsonl")
        copied.append(target.name)
    return copied


def _to_bfloat16(weights: Path) -> None:
    """Rewrite a safetensors file's float32 tensors in bfloat16 (half the bytes committed; the
    policy loads them back as float32)."""
    if not weights.is_file():
        return
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(weights)
    half = {k: v.to(torch.bfloat16) if v.dtype == torch.float32 else v for k, v in tensors.items()}
    save_file(half, weights, metadata={"format": "pt"})


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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The recipe's command line: its stages and each stage's budget."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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


if __name__ == "__main__":
    raise SystemExit(main())
