"""``python -m baselines.rl.recipes.device_check``: the GPU check (``scripts/device_check.sh``).

Prints one JSON line per part, each with its sizes, its figures and its ``seconds``:

1. ``hf_generation``: the ``hf`` backend's generated tokens/s on SmolLM2-135M at each batch
   size, free and constrained (each recorded ``llm_agents`` decision's JSON-schema grammar,
   through llguidance), temperature 1 (:mod:`benchmark.bench.device`).
2. ``grpo_update``: one GRPO update of the trainer (``Trainer.update``: the ``Policy`` with LoRA
   on the q/v projections, samples collated from recorded ``llm_agents`` chats and replies,
   ``update_policy``) on SmolLM2-135M: seconds per update and tokens/s through the update.
3. ``policy_train_step``: a training step of the ``policy`` team with the committed tiny policy
   (full fine-tuning, as ``configs/policy/sft_tiny.yaml``) at a larger batch: its generation of
   every completion of the step (the team's sampling: 12 tokens, temperature 1) in one batched
   call on recorded agent-view prompts, then ``Trainer.update``. The simulator's share of a real
   step is not in it.

SmolLM2's weights are random, drawn from its own config (seeded): its real weights (a 94 MiB
GGUF file) do not fit in what travels to the GPU machine, and the figures depend on the model's
shapes, the prompts and the number of tokens generated, not on the weights' values (random
weights seldom end a free reply early, so free rows run to ``max_tokens``). Its config and
tokenizer come from ``.device/smollm2`` (``make device-check-bundle``) or the asset cache.

Without ``--cpu`` the check needs CUDA. ``--cpu`` is the dry run with smaller sizes; ``--quick``
(with ``--cpu``) swaps SmolLM2 for a 2-layer random Llama with its tokenizer (the test's run).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from baselines.rl.recipes import device_data


@dataclass(frozen=True)
class Sizes:
    """How much each part does."""

    batches: tuple[int, ...]  # hf_generation: chats per generate call
    max_tokens: int  # hf_generation: tokens per reply at most
    repeats: int  # timed calls (updates, steps) per figure, after one warm-up
    grpo_prompts: int  # grpo_update: distinct prompts (GRPO groups)
    grpo_group: int  # grpo_update: completions per prompt
    policy_prompts: int  # policy_train_step: distinct prompts
    policy_group: int  # policy_train_step: completions per prompt


SIZES = {
    "cuda": Sizes((1, 8, 64), 64, 2, 16, 4, 64, 8),
    "cpu": Sizes((1, 4), 16, 1, 2, 2, 8, 4),
    "quick": Sizes((1, 2), 8, 1, 2, 2, 2, 2),
}


def log(text: str) -> None:
    print(f"[device_check] {text}", file=sys.stderr, flush=True)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def check_generation(model_dir: Path, device: str, sizes: Sizes, data: list[dict]) -> dict:
    """Part 1: the ``hf`` backend's tokens/s at each batch size, free and constrained."""
    from benchmark.bench.device import rates_by_batch
    from benchmark.llm.base import Constraint
    from benchmark.llm.hf import HFBackend

    start = time.perf_counter()
    backend = HFBackend(model_dir, name="smollm2-random", device=device)
    chats = [d["chat"] for d in data]
    constraints = [Constraint(d["schema"], "decision") for d in data]
    rates = rates_by_batch(
        backend,
        chats,
        constraints,
        sizes.batches,
        sizes.max_tokens,
        sizes.repeats,
        lambda: _sync(device),
    )
    return {
        "batches": list(sizes.batches),
        "max_tokens": sizes.max_tokens,
        "dtype": "float32",
        **{f"tokens_per_s_{k}": v["tokens_per_s"] for k, v in rates.items()},
        "detail": rates,
        "seconds": round(time.perf_counter() - start, 1),
    }


def _settings(model_dir: Path, device: str, out: Path, lora: bool, prompts: int, group: int):
    """The trainer's settings: GRPO as ``configs/trainer/grpo.yaml``, the policy in-process."""
    from baselines.rl.core.config import AlgoSettings, DataSettings, PolicySettings, TrainSettings
    from benchmark.runner.config import LoggerConfig

    return TrainSettings(
        trainer=AlgoSettings(name="grpo"),
        policy=PolicySettings(init=str(model_dir), lora=lora, device=device),
        data=DataSettings(seeds_per_step=prompts, group_size=group),
        logger=LoggerConfig(console=False, wandb=False),
        workers=0,
        threads=max(1, min(torch.get_num_threads(), 8)),
        resume=False,
        output_dir=str(out),
    )


def _samples(groups: list[tuple[list[int], list[list[int]]]], seed: int) -> list:
    """One sample per completion: each group is a prompt and its completions; returns drawn at
    random (seeded), so every group has a spread and none is dropped."""
    from baselines.rl.core.samples import Sample

    rng = random.Random(seed)
    out = []
    for j, (prompt, completions) in enumerate(groups):
        for gen in completions:
            ids = prompt + gen
            R = rng.gauss(0.0, 1.0)
            out.append(
                Sample(
                    ids,
                    [0] * len(prompt) + [1] * len(gen),
                    [0.0] * len(ids),
                    [(len(ids) - 1, R)],
                    R,
                    (j,),
                    (len(out),),
                    "agent_0",
                    0,
                )
            )
    return out


def _timed_updates(trainer: Any, batch: Any, repeats: int, device: str) -> list[float]:
    times = []
    for k in range(repeats + 1):  # the first is the warm-up
        _sync(device)
        start = time.perf_counter()
        trainer.update(batch)
        _sync(device)
        if k:
            times.append(time.perf_counter() - start)
    return times


def check_grpo(model_dir: Path, device: str, sizes: Sizes, data: list[dict], out: Path) -> dict:
    """Part 2: GRPO updates of SmolLM2 with LoRA on recorded ``llm_agents`` decisions."""
    from baselines.rl.core.samples import collate
    from baselines.rl.core.trainer import Trainer
    from benchmark.llm.prefix_cache import template_ids

    start = time.perf_counter()
    P, G = sizes.grpo_prompts, sizes.grpo_group
    settings = _settings(model_dir, device, out, True, P, G)
    trainer = Trainer(settings, out, log=lambda _: None)
    tok = trainer.policy.tokenizer
    replies = [
        tok(d["reply"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for d in data
    ]
    groups = [
        (
            template_ids(tok, data[j % len(data)]["chat"], generation_prompt=True),
            [replies[(j + g) % len(data)] for g in range(G)],
        )
        for j in range(P)
    ]
    batch = collate(_samples(groups, 0), tok.pad_token_id)
    times = _timed_updates(trainer, batch, sizes.repeats, device)
    per_update = statistics.median(times)
    tokens = int(batch.attention_mask.sum())
    return {
        "batch": len(batch),
        "prompts": P,
        "group_size": G,
        "minibatch": settings.trainer.minibatch_size,
        "lora": "r8 q_proj,v_proj",
        "tokens": tokens,
        "generated_tokens": int(batch.mask.sum()),
        "seconds_per_update": round(per_update, 3),
        "tokens_per_s": round(tokens / per_update, 1),
        "seconds": round(time.perf_counter() - start, 1),
    }


def check_policy_step(device: str, sizes: Sizes, data: list[dict], out: Path) -> dict:
    """Part 3: the ``policy`` team's training step (generation, then the update) with the tiny
    policy, on recorded agent-view prompts."""
    from baselines.rl.core.samples import collate
    from baselines.rl.core.trainer import Trainer
    from benchmark.llm.base import Sampling

    start = time.perf_counter()
    P, G = sizes.policy_prompts, sizes.policy_group
    settings = _settings(device_data.TINY_POLICY, device, out, False, P, G)
    trainer = Trainer(settings, out, log=lambda _: None)
    policy = trainer.policy
    prompts = [data[j % len(data)]["prompt_ids"] for j in range(P)]
    gen_s, update_s, made = [], [], 0
    for k in range(sizes.repeats + 1):  # the first is the warm-up
        _sync(device)
        t0 = time.perf_counter()
        sampling = Sampling(max_tokens=12, temperature=1.0, seed=k)
        outs = policy.generate([p for p in prompts for _ in range(G)], sampling)
        _sync(device)
        t1 = time.perf_counter()
        groups = [(p, [ids for ids, _ in outs[j * G : (j + 1) * G]]) for j, p in enumerate(prompts)]
        batch = collate(_samples(groups, k), policy.tokenizer.pad_token_id)
        trainer.update(batch)
        _sync(device)
        if k:
            gen_s.append(t1 - t0)
            update_s.append(time.perf_counter() - t1)
            made = sum(len(ids) for ids, _ in outs)
    gen, upd = statistics.median(gen_s), statistics.median(update_s)
    return {
        "model": device_data.TINY_POLICY.name,
        "batch": P * G,
        "prompts": P,
        "group_size": G,
        "minibatch": settings.trainer.minibatch_size,
        "lora": None,
        "generated_tokens": made,
        "train_tokens": int(batch.attention_mask.sum()),
        "generation_s": round(gen, 3),
        "update_s": round(upd, 3),
        "seconds_per_step": round(gen + upd, 3),
        "generated_tokens_per_s": round(made / gen, 1),
        "train_tokens_per_s": round(int(batch.attention_mask.sum()) / upd, 1),
        "seconds": round(time.perf_counter() - start, 1),
    }


def run(cpu: bool, quick: bool, parts: tuple[str, ...]) -> list[dict]:
    """Run ``parts`` and print each one's JSON line as it finishes; returns the lines."""
    if quick and not cpu:
        raise SystemExit("device_check: --quick is a size of the CPU dry run; add --cpu")
    if not cpu and not torch.cuda.is_available():
        raise SystemExit(
            f"device_check: CUDA is not available (torch {torch.__version__}, built for CUDA "
            f"{torch.version.cuda}); this check runs on a GPU. For the CPU dry run: --cpu"
        )
    device = "cpu" if cpu else "cuda"
    sizes = SIZES["quick" if quick else device]
    data = device_data.load()
    common = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "model": "tiny-random-llama" if quick else "SmolLM2-135M (random weights)",
        "sizes": "quick" if quick else device,
    }
    lines = []
    with tempfile.TemporaryDirectory(prefix="device-check-") as tmp:
        root = Path(tmp)
        files = device_data.model_files()
        log(f"model files {files}; {device}; sizes {asdict(sizes)}")
        model_dir = device_data.random_model(files, root / "model", quick)
        for part in parts:
            log(f"{part} ...")
            if part == "hf_generation":
                got = check_generation(model_dir, device, sizes, data["llm_agents"])
            elif part == "grpo_update":
                got = check_grpo(model_dir, device, sizes, data["llm_agents"], root / "grpo")
            else:  # its model is the tiny policy, which its own "model" names
                got = check_policy_step(device, sizes, data["policy"], root / "policy")
            line = measured({"part": part, **common, **got})
            print(json.dumps(line), flush=True)
            lines.append(line)
    return lines


# The timed figures each part's line must carry (the GPU check's report is read by name).
REQUIRED = {
    "hf_generation": ("seconds",),
    "grpo_update": ("seconds", "seconds_per_update", "tokens_per_s"),
    "policy_train_step": ("seconds", "generated_tokens_per_s", "train_tokens_per_s"),
}
PARTS = tuple(REQUIRED)
# The timed figures of each part's line: finite numbers, or the check fails naming the field.
RATES = (
    "seconds",
    "seconds_per_update",
    "tokens_per_s",
    "generated_tokens_per_s",
    "train_tokens_per_s",
    "tokens_per_s_free_b",
    "tokens_per_s_constrained_b",
)


def measured(line: dict) -> dict:
    """``line`` once it carries its part's timed figures (REQUIRED) and every timed figure in it
    (see RATES) is a finite number; ValueError naming the part and field otherwise (a clock that
    broke, or a figure left out, must not pass as a report)."""
    part = line.get("part")
    if part not in REQUIRED:
        raise ValueError(f"a line of part {part!r}: expected one of {', '.join(REQUIRED)}")
    missing = [k for k in REQUIRED[part] if k not in line]
    if missing:
        raise ValueError(f"{part}: timed figures missing: {', '.join(missing)}")
    for key, value in line.items():
        if key.startswith(RATES) and not (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        ):
            raise ValueError(f"{part}: figure {key}={value!r} is not a finite number")
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The GPU check: one JSON line per part.")
    parser.add_argument("--cpu", action="store_true", help="the dry run on CPU, smaller sizes")
    parser.add_argument("--quick", action="store_true", help="with --cpu: a tiny model")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    run(args.cpu, args.quick, tuple(args.parts))
    log(f"done in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
