"""The training job behind ``python -m baselines.train``: evaluate, train, checkpoint, log.

Writes into the run directory: ``config.yaml``, ``metrics.jsonl`` (one row per training step
with ``kind: train``, one per evaluation with ``kind: eval``, one per rollback of the KL guard
with ``kind: guard``), ``checkpoints/`` and ``final_model/`` (a plain transformers directory of
the trained policy).

With ``guard.enabled`` (``baselines/rl/guard.py``) every update is judged by its KL to the
reference and every held-out evaluation by its TR before anything is saved, so only weights
that passed are checkpointed (the starting weights are saved as step 0). A failure restores
the last checkpoint that passed, lowers the learning rate and saves that state at the current
step, so a resumed run keeps the lowered rate; training goes on from the current step.

A resumed run continues the history of its checkpoint: rows logged past it (the steps a killed
process played after its last checkpoint, played again now) move to ``metrics.abandoned.jsonl``,
``wall_s`` goes on from the checkpoint's, and an evaluation already logged at the checkpoint's
step is not repeated (so running a finished run again adds nothing). A fresh start (no
checkpoint, or ``resume=false``) moves every earlier row there.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from baselines.rl.config import train_settings
from baselines.rl.guard import Decision
from baselines.rl.history import ROW_KEYS, continue_history
from baselines.rl.trainer import REF_KL, Trainer, fmt_stats
from benchmark.runner.loggers import MetricLoggers

INDEX_KEY = "eval/task/TR"  # the guard's collaboration index: held-out checklist atoms done
CONSOLE_KEYS = (
    "task/SR",
    "charts/return_mean",
    "charts/group_reward_std",
    "losses/policy",
    "losses/value",
    "losses/entropy",
    "charts/grad_norm",
    REF_KL,
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
    history = continue_history(metrics_file, trainer.saved_step)
    # Wall time goes on from the checkpoint's, so a resumed run's clock is its compute so far.
    start = time.perf_counter() - max((r.get("wall_s", 0.0) for r in history), default=0.0)
    evals = [
        {k: v for k, v in r.items() if k not in ROW_KEYS} for r in history if r["kind"] == "eval"
    ]
    first: dict[str, float] = evals[0] if evals else {}
    last: dict[str, float] = evals[-1] if evals else {}
    evaluated_at = -1  # the step whose weights the last evaluation is of
    for row in history:
        if row["kind"] == "eval":
            evaluated_at = row["step"]
        elif row["kind"] == "guard" and row.get("guard/restore_step") is not None:
            evaluated_at = -1  # those weights were rolled back
    guard = trainer.guard if settings.guard.enabled else None

    def record(kind: str, values: dict[str, Any]) -> None:
        row = {"kind": kind, "step": trainer.step, "wall_s": time.perf_counter() - start}
        with metrics_file.open("a") as f:
            f.write(json.dumps({**row, **values}) + "\n")
        numbers = {k: v for k, v in values.items() if isinstance(v, int | float)}
        loggers.log_values(numbers, trainer.step)

    def evaluate() -> dict[str, float]:
        values = trainer.evaluate()
        record("eval", values)
        say(
            f"[bold]eval[/bold] step {trainer.step}: SR {values.get('eval/task/SR', 0):.3f} "
            f"TR {values.get('eval/task/TR', 0):.3f} B {values.get('eval/collab/B', 0):.3f} "
            f"({cfg.eval.episodes} held-out episodes)"
        )
        return values

    stopped = False
    restored_at = -1

    def failed(decision: Decision) -> bool:
        """False for a passing decision; otherwise restore the last checkpoint that passed,
        save it at the current step with the new learning rate, and log why."""
        nonlocal stopped, restored_at
        if decision.passed:
            return False
        stopped = decision.action == "stop"
        say(f"[bold red]guard[/bold red] step {decision.step}: {decision.reason}")
        record("guard", {f"guard/{k}": v for k, v in decision.row().items() if k != "step"})
        if decision.restore_step is not None:
            trainer.restore(decision.restore_step, decision.lr)
            trainer.save()
            restored_at = trainer.step
        return True

    def out_of_time() -> bool:
        return bool(cfg.max_minutes) and time.perf_counter() - start > 60 * cfg.max_minutes

    try:
        if trainer.step == 0 and evaluated_at != 0:
            first = last = evaluate()
            evaluated_at = 0
            if guard is not None:
                failed(guard.check_eval(0, first.get(INDEX_KEY)))  # the first one passes
        if guard is not None and guard.good_step is None:
            trainer.save()  # the starting weights: the first checkpoint that passed
        while trainer.step < cfg.steps and not stopped:
            if out_of_time():
                say(f"stopping at step {trainer.step}: max_minutes={cfg.max_minutes} reached")
                break
            stats = trainer.train_step()
            record("train", stats)
            say(fmt_stats(trainer.step, stats, CONSOLE_KEYS))
            # The last step (of the run or of the budget) is evaluated before it is saved.
            final = trainer.step >= cfg.steps or out_of_time()
            if guard is not None and failed(guard.check_step(trainer.step, stats[REF_KL])):
                continue
            save = final or trainer.step % cfg.checkpoint_every == 0
            if save and guard is None:
                trainer.save()  # before the evaluation: a resume point
            if final or (cfg.eval.every and trainer.step % cfg.eval.every == 0):
                values = evaluate()
                index = values.get(INDEX_KEY)
                if guard is not None and failed(guard.check_eval(trainer.step, index)):
                    continue
                last, evaluated_at = values, trainer.step
            if save and guard is not None:
                trainer.save()  # under the guard only weights that passed are saved
        if evaluated_at != trainer.step:
            # Resumed after the last step, out of time after a save, or a rollback ended the
            # loop: evaluate what stays (judged, unless it was just restored).
            last = evaluate()
            judged = guard is not None and not stopped and restored_at != trainer.step
            if judged and failed(trainer.guard.check_eval(trainer.step, last.get(INDEX_KEY))):
                last = evaluate()  # the restored weights'
        if trainer.saved_step != trainer.step:
            trainer.save()
        trainer.policy.save_pretrained(root / "final_model")
        if trainer.lora is not None:
            from baselines.rl.sft import save_lora

            save_lora(trainer.policy, root / "final_adapter", trainer.cfg.policy.adapter_out)
    finally:
        loggers.close()
        trainer.close()
    return {"first": first, "final": last, "root": root, "steps": trainer.step}
