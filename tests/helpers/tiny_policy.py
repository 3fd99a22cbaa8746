"""A tiny policy warm-started by SFT on a few heuristic episodes, for the RL tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from baselines.rl.config import SFTConfig
from baselines.rl.sft import run_sft


def warm_started_policy(out: Path, episodes: int, **overrides: Any) -> dict[str, Any]:
    """Run SFT of a new tiny Llama (its tokenizer trained on the demonstrations) into ``out``;
    returns SFT's result (the model is ``out / "model"``)."""
    cfg = OmegaConf.structured(SFTConfig)
    cfg.merge_with(
        {
            "episodes": episodes,
            "epochs": 1,
            "tiny": {"hidden": 32, "layers": 2, "heads": 4, "vocab": 500},
            "name": None,
            "output_dir": str(out),
            **overrides,
        }
    )
    return run_sft(cfg, out, log=lambda *_: None)
