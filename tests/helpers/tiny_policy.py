"""A tiny policy warm-started by SFT on a few heuristic episodes, for the RL tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from baselines.rl.core.config import SFTConfig
from baselines.rl.recipes.sft import run_sft


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


def tiny_train_config(model: Path, out: Path, *settings: dict[str, Any]) -> Any:
    """A training config of the tiny policy at ``model`` into ``out``: one seed of two
    rollouts per step, 4-token replies, one held-out episode, inline and on one thread; each of
    ``settings`` is merged on top, in order."""
    from baselines.rl.core.config import TrainConfig

    cfg = OmegaConf.structured(TrainConfig)
    cfg.merge_with(
        {
            "policy": {"init": str(model)},
            "data": {"seeds_per_step": 1, "group_size": 2},
            "rollout": {"max_tokens": 4},
            "eval": {"episodes": 1},
            "logger": {"console": False, "wandb": False},
            "workers": 0,
            "threads": 1,
            "output_dir": str(out),
            "trainer": {"minibatch_size": 16, "entropy_coef": 0.01},
        }
    )
    for extra in settings:
        cfg.merge_with(extra)
    return cfg
