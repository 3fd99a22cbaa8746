"""Held-out evaluation of saved policies, with exact confidence intervals on the success rate.

    python -m baselines.rl.evaluate sft-tiny outputs/rl_recipe/grpo/final_model --episodes 200

Every policy plays the same held-out episodes (``eval.*`` of the training config: split, seeds,
temperature) on Ray workers; sampling is seeded per episode, so the numbers are reproducible.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from baselines.rl.config import TrainConfig
from baselines.rl.trainer import Trainer
from benchmark.stats import clopper_pearson


def evaluate_policy(
    init: str, episodes: int, workers: int = 2, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """SR (with its 95% Clopper-Pearson interval) and the collaboration metrics of ``init``
    (a saved policy name or model directory) on ``episodes`` held-out episodes."""
    cfg = OmegaConf.structured(TrainConfig)
    with tempfile.TemporaryDirectory(prefix="rl-eval") as tmp:
        cfg.merge_with(
            {
                "policy": {"init": init},
                "eval": {"episodes": episodes},
                "logger": {"console": False, "wandb": False},
                "workers": workers,
                "resume": False,
                "output_dir": tmp,
            }
        )
        cfg.merge_with(overrides or {})
        trainer = Trainer(cfg, tmp, log=lambda *_: None)
        try:
            values = trainer.evaluate()
        finally:
            trainer.close()
    sr = values["eval/task/SR"]
    successes = round(sr * episodes)
    lo, hi = clopper_pearson(successes, episodes)
    return {"policy": init, "episodes": episodes, "SR_lo": lo, "SR_hi": hi, **values}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="+", help="saved policy names or model directories")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = [evaluate_policy(p, args.episodes, args.workers) for p in args.policies]
    for r in rows:
        print(
            f"{r['policy']}: SR {r['eval/task/SR']:.3f} [{r['SR_lo']:.3f}, {r['SR_hi']:.3f}] "
            f"TR {r['eval/task/TR']:.3f} L {r.get('eval/task/L', float('nan')):.1f} "
            f"redundancy {r.get('eval/collab/redundancy', float('nan')):.3f} "
            f"messages {r.get('eval/comm/messages', float('nan')):.1f} ({r['episodes']} episodes)"
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
