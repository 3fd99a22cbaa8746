"""Copying a run's finished adapters (and the tiny policy team) to ``baselines/adapters/``, the
names the paper tables load."""

from __future__ import annotations

import shutil
from pathlib import Path

from baselines.llm_support import ADAPTERS_DIR
from baselines.rl.recipes.llm_recipe.common import PREFIX, TINY_DIR


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
