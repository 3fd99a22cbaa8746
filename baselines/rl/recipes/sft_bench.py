"""``python -m baselines.rl.recipes.sft_bench``: SFT steps per second of the embedded SmolLM2
on CPU.

The demonstrations are the heuristic team's decisions in the ``llm_agents_v4`` prompt (its
memory; ``episodes`` train-split episodes of transport, switch-off and search), encoded by the
chat template as the backends encode them. Each setting times ``steps`` AdamW steps of
``batch`` demonstrations after one warm-up step, with ``threads`` torch threads:

* ``full_logits``: the vocabulary projection at every position (:func:`~baselines.rl.recipes.sft.
  sft_loss`), LoRA (q, v; rank 8) on every layer: how SFT ran before;
* ``reply_logits``: the projection on the reply positions only (:func:`~baselines.rl.recipes.sft.
  reply_loss`, the same loss), LoRA on every layer;
* ``reply_logits_top16`` / ``top8``: LoRA on the top 16 (8, rank 16) layers only, so that the
  backward pass stops there;
* ``reply_logits_top16_r16_bf16``: what ``make train-llm`` runs: rank 16 on the top 16 layers,
  the matmuls in bfloat16 (autocast; weights and optimizer in float32).

One JSON line: examples/s and tokens/s of each, the mean prompt and reply tokens, and each
setting's speed-up over ``full_logits``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from omegaconf import OmegaConf

from baselines.rl.core.policy import LoraOptions, Policy
from baselines.rl.recipes.llm_demos import llm_demonstrations
from baselines.rl.recipes.sft import encode_demos, reply_loss, sft_loss
from baselines.rl.recipes.view_check import TASKS, V4
from benchmark.llm.smollm2 import smollm2_dir

Rows = list[tuple[list[int], int]]
# name -> (loss, LoRA placement, bf16 autocast)
SETTINGS: dict[str, tuple[Callable[[Policy, Rows], torch.Tensor], LoraOptions, bool]] = {
    "full_logits": (sft_loss, LoraOptions(), False),
    "reply_logits": (reply_loss, LoraOptions(), False),
    "reply_logits_top16": (reply_loss, LoraOptions(layers=16), False),
    "reply_logits_top8_r16": (reply_loss, LoraOptions(r=16, alpha=32, layers=8), False),
    "reply_logits_top16_r16_bf16": (reply_loss, LoraOptions(r=16, alpha=32, layers=16), True),
}


def demos(episodes: int) -> list[dict[str, Any]]:
    """The heuristic's decisions in the ``llm_agents_v4`` prompt."""
    cfg = OmegaConf.create(
        {
            "format": "llm_agents",
            "teacher": "heuristic",
            "prompt": V4,
            "tasks": list(TASKS),
            "episodes": episodes,
            "n_agents": 2,
            "split": "train",
            "seed_start": 0,
            "successful_only": False,
            "max_subtasks": 8,
            "rollout": {"reward_sharing": 0.7, "comm": True, "ambiguity": "types"},
        }
    )
    out, _ = llm_demonstrations(cfg)
    return out


def time_setting(
    loss_fn: Callable[[Policy, Rows], torch.Tensor],
    lora: LoraOptions,
    batches: list[Rows],
    threads: int,
    bf16: bool = False,
) -> float:
    """Seconds per step over ``batches[1:]`` (``batches[0]`` warms up)."""
    policy = Policy(smollm2_dir(), lora=lora, threads=threads)
    policy.model.train()
    optimizer = torch.optim.AdamW(list(policy.parameters()), lr=1e-4)
    times = []
    for batch in batches:
        start = time.perf_counter()
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            loss = loss_fn(policy, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return sum(times[1:]) / len(times[1:])


def run(episodes: int, steps: int, batch: int, threads: int, settings: Sequence[str]) -> dict:
    examples = demos(episodes)
    policy = Policy(smollm2_dir(), threads=threads)
    rows = encode_demos(policy, examples)
    del policy
    rng = random.Random(0)
    rng.shuffle(rows)
    batches = [rows[k * batch : (k + 1) * batch] for k in range(steps + 1)]
    tokens = sum(len(ids) for b in batches[1:] for ids, _ in b)
    out: dict[str, Any] = {
        "bench": "sft",
        "demonstrations": len(rows),
        "prompt_tokens": round(sum(start for _, start in rows) / len(rows), 1),
        "reply_tokens": round(sum(len(ids) - start for ids, start in rows) / len(rows), 1),
        "batch": batch,
        "steps": steps,
        "threads": threads,
    }
    for name in settings:
        loss_fn, lora, bf16 = SETTINGS[name]
        seconds = time_setting(loss_fn, lora, batches, threads, bf16)
        out[name] = {
            "s_per_step": round(seconds, 2),
            "examples_per_s": round(batch / seconds, 2),
            "tokens_per_s": round(tokens / steps / seconds, 1),
        }
    if "full_logits" in out:
        for name in settings:
            out[name]["speedup"] = round(
                out["full_logits"]["s_per_step"] / out[name]["s_per_step"], 2
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.rl.recipes.sft_bench", description=__doc__
    )
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    args = parser.parse_args(argv)
    print(json.dumps(run(args.episodes, args.steps, args.batch, args.threads, args.settings)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
