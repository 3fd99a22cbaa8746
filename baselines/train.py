"""``python -m baselines.train``: train an LLM team policy with GRPO, PPO or SPPO (Hydra).

Examples::

    python -m baselines.sft                                  # warm start (saves sft-tiny)
    python -m baselines.train trainer=grpo steps=60
    python -m baselines.train trainer=ppo policy.init=sft-tiny workers=0
    python -m baselines.train policy=smollm2_lora steps=1 data.seeds_per_step=1

A run directory holds ``metrics.jsonl`` (one row per step and evaluation), checkpoints and the
wandb files; re-running into it (``hydra.run.dir=<dir>``) resumes from the latest checkpoint.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from baselines.rl.core.config import register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="../configs", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from baselines.rl.core.app import train

    return train(cfg)["final"].get("eval/task/SR")


if __name__ == "__main__":
    main()
