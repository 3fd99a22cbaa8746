"""Where per-episode metrics go besides the run directory: console, W&B, TensorBoard.

Keys are namespaced: ``task/`` (SR, TR, C, L), ``collab/`` (balance, workload, redundancy,
interference, speedup), ``comm/`` (messages, tokens, influence).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

NAMESPACE = {
    "SR": "task",
    "TR": "task",
    "C": "task",
    "L": "task",
    "L_decisions": "task",
    "B": "collab",
    "workload_entropy": "collab",
    "workload_gini": "collab",
    "redundancy": "collab",
    "wasted_action_rate": "collab",
    "blocked_ticks": "collab",
    "collisions": "collab",
    "messages": "comm",
    "message_tokens": "comm",
    "influence_rate": "comm",
}


def namespaced(row: dict[str, Any]) -> dict[str, float]:
    return {f"{ns}/{k}": float(row[k]) for k, ns in NAMESPACE.items() if row.get(k) is not None}


class MetricLoggers:
    """Fan-out to the enabled loggers; each is optional and configured by ``LoggerConfig``."""

    def __init__(self, cfg: Any, root: Path, run_name: str, config: dict[str, Any]) -> None:
        self.step = 0
        self.wandb_run = None
        self.tb = None
        if cfg.wandb and cfg.wandb_mode != "disabled":
            import wandb

            os.environ.setdefault("WANDB_SILENT", "true")
            self.wandb_run = wandb.init(
                project=cfg.wandb_project,
                name=run_name,
                config=config,
                dir=str(root),
                mode=cfg.wandb_mode,
                reinit="finish_previous",
            )
        if cfg.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(root / "tensorboard"))

    def log_episode(self, row: dict[str, Any]) -> None:
        if row.get("status") != "ok":
            return
        values = namespaced(row)
        self.step += 1
        if self.wandb_run is not None:
            self.wandb_run.log(values, step=self.step)
        if self.tb is not None:
            for key, value in values.items():
                self.tb.add_scalar(key, value, self.step)

    def log_values(self, values: dict[str, float], step: int) -> None:
        """Scalars at an explicit step (trainers log one row per update)."""
        if self.wandb_run is not None:
            self.wandb_run.log(values, step=step)
        if self.tb is not None:
            for key, value in values.items():
                self.tb.add_scalar(key, value, step)

    def close(self) -> None:
        if self.wandb_run is not None:
            self.wandb_run.finish()
        if self.tb is not None:
            self.tb.close()
