"""Where per-episode metrics go besides the run directory: console, W&B, TensorBoard, Prometheus.

Every per-episode metric declared in :mod:`benchmark.metrics.specs`, the reference ones
(speedup, parallel efficiency, EI) included, is logged under its namespaced key
(``task/SR``, ``collab/speedup``, ``comm/messages``); a metric without a value in a row (None:
undefined for that episode) is left out of that row. Prometheus serves them as live gauges
(:mod:`benchmark.runner.prometheus`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from benchmark.metrics.specs import at_level
from benchmark.runner.prometheus import EPISODE_LABELS, PrometheusLogger

# Metric name -> its namespace, for every metric a result row can carry.
NAMESPACE = {m.name: m.namespace for m in at_level("episode", "reference")}


def namespaced(row: dict[str, Any]) -> dict[str, float]:
    """The row's metric values under their ``<namespace>/<name>`` keys."""
    return {f"{ns}/{k}": float(row[k]) for k, ns in NAMESPACE.items() if row.get(k) is not None}


class MetricLoggers:
    """Fan-out to the enabled loggers; each is optional and configured by ``LoggerConfig``."""

    def __init__(self, cfg: Any, root: Path, run_name: str, config: dict[str, Any]) -> None:
        self.step = 0
        self.wandb_run = None
        self.tb = None
        self.prometheus: PrometheusLogger | None = None
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
        if cfg.prometheus:  # last: a logger failing to start leaves no server thread behind
            self.prometheus = PrometheusLogger(
                cfg.prometheus_host,
                cfg.prometheus_port,
                {"run": run_name},
                cfg.prometheus_final_scrape_s,
            )

    def log_episode(self, row: dict[str, Any]) -> None:
        """One episode's metrics at the next step (steps count the logged episodes from 1)."""
        if row.get("status") != "ok":
            raise ValueError(
                f"only finished episodes are logged; {row.get('key')!r} has status "
                f"{row.get('status')!r}"
            )
        self.step += 1
        values = namespaced(row)
        self._log_scalars(values, self.step)
        if self.prometheus is not None:
            self.prometheus.log_episode(values, {k: row[k] for k in EPISODE_LABELS})

    def log_values(self, values: dict[str, float], step: int) -> None:
        """Scalars at an explicit step (trainers log one row per update)."""
        self._log_scalars(values, step)
        if self.prometheus is not None:
            self.prometheus.log_values(values, step)

    def _log_scalars(self, values: dict[str, float], step: int) -> None:
        if self.wandb_run is not None:
            self.wandb_run.log(values, step=step)
        if self.tb is not None:
            for key, value in values.items():
                self.tb.add_scalar(key, value, step)

    def close(self) -> None:
        if self.prometheus is not None:
            self.prometheus.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()
        if self.tb is not None:
            self.tb.close()
