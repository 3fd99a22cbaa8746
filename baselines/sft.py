"""``python -m baselines.sft``: warm-start a policy on a scripted team's decisions (Hydra).

Examples::

    python -m baselines.sft                                  # tiny model, heuristic teacher
    python -m baselines.sft teacher=oracle episodes=400 name=sft-oracle
    python -m baselines.sft init=smollm2 name=sft-smollm2 epochs=1
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig

from baselines.rl.core.config import register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="../configs", config_name="sft")
def main(cfg: DictConfig) -> None:
    from baselines.rl.recipes.sft import run_sft

    run_sft(cfg, Path(cfg.output_dir))


if __name__ == "__main__":
    main()
