"""The training job behind ``python -m baselines.train``: evaluate, train, checkpoint, log.

Writes into the run directory: ``config.yaml``, ``metrics.jsonl`` (one row per training step
with ``kind: train``, one per evaluation with ``kind: eval``), ``checkpoints/`` and
``final_model/`` (a plain transformers directory of the trained policy).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from baselines.rl.config import train_settings
from baselines.rl.trainer import Trainer, fmt_stats
from benchmark.runner.loggers import MetricLoggers

CONSOLE_KEYS = (
    "task/SR",
    "charts/return_mean",
    "charts/group_reward_std",
    "losses/policy",
    "losses/value",
    "losses/entropy",
    "charts/grad_norm",
    "collab/B",
    "perf/step_s",
)


def train(cfg: DictConfig, console: Console | None = None) -> dict[str, Any]:
    """Run (or resume) the configured training; returns the first and last evaluations."""
    settings = train_settings(cfg)
    console = console or Console(width=None if Console().is_terminal else 130)
    say = console.print if cfg.logger.console else (lambda *_: None)
    root = Path(cfg.output_dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    container = OmegaConf.to_container(cfg, resolve=True)
    (root / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    trainer = Trainer(settings, root, log=say)
    loggers = MetricLoggers(cfg.logger, root, root.name, container)
    if loggers.prometheus is not None:
        console.print(f"Prometheus metrics at {loggers.prometheus.url}")
    metrics_file = root / "metrics.jsonl"
    start = time.perf_counter()
    first: dict[str, float] = {}
    last: dict[str, float] = {}

    def record(kind: str, values: dict[str, float]) -> None:
        row = {"kind": kind, "step": trainer.step, "wall_s": time.perf_counter() - start}
        with metrics_file.open("a") as f:
            f.write(json.dumps({**row, **values}) + "\n")
        loggers.log_values(values, trainer.step)

    def evaluate() -> dict[str, float]:
        values = trainer.evaluate()
        record("eval", values)
        say(
            f"[bold]eval[/bold] step {trainer.step}: SR {values.get('eval/task/SR', 0):.3f} "
            f"TR {values.get('eval/task/TR', 0):.3f} B {values.get('eval/collab/B', 0):.3f} "
            f"({cfg.eval.episodes} held-out episodes)"
        )
        return values

    evaluated_at = -1
    try:
        if trainer.step == 0:
            first = evaluate()
            evaluated_at = 0
        while trainer.step < cfg.steps:
            if cfg.max_minutes and time.perf_counter() - start > 60 * cfg.max_minutes:
                say(f"stopping at step {trainer.step}: max_minutes={cfg.max_minutes} reached")
                break
            stats = trainer.train_step()
            record("train", stats)
            say(fmt_stats(trainer.step, stats, CONSOLE_KEYS))
            if trainer.step % cfg.checkpoint_every == 0:
                trainer.save()
            if cfg.eval.every and trainer.step % cfg.eval.every == 0 and trainer.step < cfg.steps:
                evaluate()
                evaluated_at = trainer.step
        trainer.save()
        last = evaluate() if evaluated_at != trainer.step else first
        trainer.policy.save_pretrained(root / "final_model")
        if trainer.lora is not None:
            from baselines.rl.sft import save_lora

            save_lora(trainer.policy, root / "final_adapter", trainer.cfg.policy.adapter_out)
    finally:
        loggers.close()
        trainer.close()
    return {"first": first, "final": last, "root": root, "steps": trainer.step}
