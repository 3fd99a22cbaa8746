"""The training job behind ``python -m baselines.train``: evaluate, train, checkpoint, log.

Writes into the run directory: ``config.yaml``, ``metrics.jsonl`` (one row per training step
with ``kind: train``, one per evaluation with ``kind: eval``, one per rollback of the KL guard
with ``kind: guard``), ``checkpoints/`` and ``final_model/`` (a plain transformers directory of
the trained policy).

With ``guard.enabled`` (``baselines/rl/core/guard.py``) every update is judged by its KL to the
reference and every held-out evaluation by its TR before anything is saved, so only weights
that passed are checkpointed (the starting weights are saved as step 0). A failure restores
the last checkpoint that passed, lowers the learning rate and saves that state at the current
step, so a resumed run keeps the lowered rate; training goes on from the current step.

A resumed run continues the history of its checkpoint: rows logged past it (the steps a killed
process played after its last checkpoint, played again now) move to ``metrics.abandoned.jsonl``,
``wall_s`` goes on from the checkpoint's, and an evaluation already logged at the checkpoint's
step is not repeated (so running a finished run again adds nothing), while one that was due
there but not logged (the process killed between the checkpoint and its evaluation) is made
before training goes on. A fresh start (no
checkpoint, or ``resume=false``) moves every earlier row there.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from baselines.rl.core.config import train_settings
from baselines.rl.core.guard import Decision
from baselines.rl.core.history import ROW_KEYS, continue_history
from baselines.rl.core.trainer import REF_KL, Trainer, fmt_stats
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
    return TrainingRun(cfg, console).run()


class TrainingRun:
    """One training job in its run directory: the trainer, its log (``metrics.jsonl`` and the
    configured loggers) and, with ``guard.enabled``, the guard's judging, restoring and saving."""

    def __init__(self, cfg: DictConfig, console: Console | None = None) -> None:
        settings = train_settings(cfg)
        self.cfg = cfg
        console = console or Console(width=None if Console().is_terminal else 130)
        self.say = console.print if cfg.logger.console else (lambda *_: None)
        self.root = root = Path(cfg.output_dir).resolve()
        root.mkdir(parents=True, exist_ok=True)
        container = OmegaConf.to_container(cfg, resolve=True)
        (root / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        self.trainer = Trainer(settings, root, log=self.say)
        self.loggers = MetricLoggers(cfg.logger, root, root.name, container)
        if self.loggers.prometheus is not None:
            console.print(f"Prometheus metrics at {self.loggers.prometheus.url}")
        self.metrics_file = root / "metrics.jsonl"
        history = continue_history(self.metrics_file, self.trainer.saved_step)
        # Wall time goes on from the checkpoint's, so a resumed run's clock is its compute so far.
        self.start = time.perf_counter() - max((r.get("wall_s", 0.0) for r in history), default=0)
        evals = [
            {k: v for k, v in r.items() if k not in ROW_KEYS}
            for r in history
            if r["kind"] == "eval"
        ]
        self.first: dict[str, float] = evals[0] if evals else {}
        self.last: dict[str, float] = evals[-1] if evals else {}
        self.evaluated_at = -1  # the step whose weights the last evaluation is of
        for row in history:
            if row["kind"] == "eval":
                self.evaluated_at = row["step"]
            elif row["kind"] == "guard" and row.get("guard/restore_step") is not None:
                self.evaluated_at = -1  # those weights were rolled back
        self.guard = self.trainer.guard if settings.guard.enabled else None
        self.stopped = False  # the guard ended training
        self.restored_at = -1  # the step whose weights a rollback has just restored

    # ------------------------------------------------------------------ the log
    def record(self, kind: str, values: dict[str, Any]) -> None:
        step = self.trainer.step
        row = {"kind": kind, "step": step, "wall_s": time.perf_counter() - self.start}
        with self.metrics_file.open("a") as f:
            f.write(json.dumps({**row, **values}) + "\n")
        numbers = {k: v for k, v in values.items() if isinstance(v, int | float)}
        self.loggers.log_values(numbers, step)

    def evaluate(self) -> dict[str, float]:
        """A held-out evaluation of the current weights, logged."""
        values = self.trainer.evaluate()
        self.record("eval", values)
        self.say(
            f"[bold]eval[/bold] step {self.trainer.step}: "
            f"SR {values.get('eval/task/SR', 0):.3f} TR {values.get('eval/task/TR', 0):.3f} "
            f"B {values.get('eval/collab/B', 0):.3f} ({self.cfg.eval.episodes} held-out episodes)"
        )
        return values

    # ------------------------------------------------------------------ the guard
    def failed(self, decision: Decision) -> bool:
        """False for a passing decision; otherwise restore the last checkpoint that passed,
        save it at the current step with the new learning rate, and log why."""
        if decision.passed:
            return False
        self.stopped = decision.action == "stop"
        self.say(f"[bold red]guard[/bold red] step {decision.step}: {decision.reason}")
        self.record("guard", {f"guard/{k}": v for k, v in decision.row().items() if k != "step"})
        if decision.restore_step is not None:
            self.trainer.restore(decision.restore_step, decision.lr)
            self.trainer.save()
            self.restored_at = self.trainer.step
        return True

    def out_of_time(self) -> bool:
        minutes = self.cfg.max_minutes
        return bool(minutes) and time.perf_counter() - self.start > 60 * minutes

    # ------------------------------------------------------------------ the job
    def run(self) -> dict[str, Any]:
        """Evaluate the start, train to ``cfg.steps`` (or the time budget), evaluate the end,
        save the final model; returns the first and last evaluations."""
        trainer = self.trainer
        try:
            self._start()
            self._train()
            self._finish()
        finally:
            self.loggers.close()
            trainer.close()
        return {"first": self.first, "final": self.last, "root": self.root, "steps": trainer.step}

    def _eval_due(self, step: int) -> bool:
        """Whether the periodic evaluation falls on ``step`` (the last step's is the finish's)."""
        every = self.cfg.eval.every
        return bool(every) and step % every == 0

    def _evaluation_missed(self, step: int) -> bool:
        """A resumed checkpoint whose evaluation was due but is not in the log: the process was
        killed between the two. Without the guard only: under it a checkpoint is saved after
        its evaluation passed."""
        due = self.guard is None and 0 < step < self.cfg.steps and self._eval_due(step)
        return due and self.evaluated_at != step

    def _start(self) -> None:
        """The starting weights' evaluation (once), and under the guard their checkpoint; on a
        resume, a missed evaluation of the checkpoint's weights."""
        guard, step = self.guard, self.trainer.step
        if step == 0 and self.evaluated_at != 0:
            self.first = self.last = self.evaluate()
            self.evaluated_at = 0
            if guard is not None:
                self.failed(guard.check_eval(0, self.first.get(INDEX_KEY)))  # the first passes
        elif self._evaluation_missed(step):
            self.last, self.evaluated_at = self.evaluate(), step
        elif guard is not None and self.trainer.pending_eval:
            # Resumed from weights saved before their evaluation: evaluate and judge them now.
            values = self.evaluate()
            if not self.failed(guard.check_eval(step, values.get(INDEX_KEY))):
                self.last, self.evaluated_at = values, step
                self.trainer.save()
        if guard is not None and guard.good_step is None:
            self.trainer.save()  # the starting weights: the first checkpoint that passed

    def _train(self) -> None:
        """The updates, each judged, evaluated and checkpointed as configured."""
        cfg, trainer, guard = self.cfg, self.trainer, self.guard
        while trainer.step < cfg.steps and not self.stopped:
            if self.out_of_time():
                self.say(f"stopping at step {trainer.step}: max_minutes={cfg.max_minutes} reached")
                break
            stats = trainer.train_step()
            self.record("train", stats)
            self.say(fmt_stats(trainer.step, stats, CONSOLE_KEYS))
            # The last step (of the run or of the budget) is evaluated before it is saved.
            final = trainer.step >= cfg.steps or self.out_of_time()
            if guard is not None and self.failed(guard.check_step(trainer.step, stats[REF_KL])):
                continue
            save = final or trainer.step % cfg.checkpoint_every == 0
            evaluating = final or self._eval_due(trainer.step)
            if save and guard is None:
                trainer.save()  # before the evaluation: a resume point
            elif save and evaluating and cfg.keep_checkpoints != 1:  # 0 keeps all
                trainer.save(pending_eval=True)  # a resume point, judged on resume
            if evaluating:
                values = self.evaluate()
                index = values.get(INDEX_KEY)
                if guard is not None and self.failed(guard.check_eval(trainer.step, index)):
                    continue
                self.last, self.evaluated_at = values, trainer.step
            if save and guard is not None:
                trainer.save()  # under the guard only weights that passed are saved

    def _finish(self) -> None:
        """Evaluate what stays if the loop did not, save it and write the final model."""
        trainer, guard = self.trainer, self.guard
        if self.evaluated_at != trainer.step:
            # Resumed after the last step, out of time after a save, or a rollback ended the
            # loop: evaluate what stays (judged, unless it was just restored).
            self.last = self.evaluate()
            judged = guard is not None and not self.stopped and self.restored_at != trainer.step
            if judged and self.failed(guard.check_eval(trainer.step, self.last.get(INDEX_KEY))):
                self.last = self.evaluate()  # the restored weights'
        if trainer.saved_step != trainer.step:
            trainer.save()
        trainer.policy.save_pretrained(self.root / "final_model")
        if trainer.lora is not None:
            from baselines.rl.recipes.sft import save_lora

            save_lora(trainer.policy, self.root / "final_adapter", trainer.cfg.policy.adapter_out)
