"""``python -m benchmark.run``: the Hydra entry point of the evaluation runner.

Examples::

    python -m benchmark.run                                 # the default suite, oracle team
    python -m benchmark.run suite=smoke baseline=random workers=0
    python -m benchmark.run -m baseline=oracle,random n_agents=1,2,3
    python -m benchmark.run experiment=comm_ablation
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from benchmark.runner.config import register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="../configs", config_name="run")
def main(cfg: DictConfig) -> float | None:
    from benchmark.runner.app import run

    result = run(cfg)
    overall = [r for r in result["table"] if r["family"] == "all"]
    return overall[0]["SR"]["mean"] if overall else None


if __name__ == "__main__":
    main()
