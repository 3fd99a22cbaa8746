"""verl's synchronous V1 trainer with CollabBench's metrics in its logs and the KL guard.

:class:`CollabBenchTrainer` is registered as ``collab_bench_sync``
(``trainer.v1.trainer_mode=collab_bench_sync``) in the process that imports this module. verl
looks the trainer up inside its ``TaskRunnerV1`` Ray actor, so :mod:`.train` imports this module
there. What it adds to verl's ``PPOTrainerSync``:

* **Step metrics.** Under V1 a step's batch lives in TransferQueue, one entry per sample, whose
  ``extra_fields`` hold the agent loop's ``reward_extra_info`` (the episode's metrics) and
  ``episode_id``. ``_compute_metrics`` reads them, leaving out the padding rows verl adds to fill
  its mini-batches, and adds :func:`~.metrics.batch_metrics`: ``task/SR``, ``task/TR``,
  ``collab/B``, ``comm/messages``, ... (the runner's names) and ``charts/episodes``, next to
  verl's ``actor/*``, ``critic/*``, ``timing_s/*`` and ``perf/*``. verl's loggers (console,
  wandb, tensorboard, file) log them with the rest.
* **Validation metrics.** verl's validation clears each batch before it returns, so the trainer
  keeps the samples' ``extra_fields`` as the replay buffer hands each batch out and adds
  ``eval/task/SR``, ``eval/collab/B``, ..., ``eval/episodes``: the CPU trainer's names for
  held-out evaluations. Each episode copy counts once. verl's own
  ``val-aux/collab_bench/<key>/...`` remain, counting every agent row.
* **The KL guard** (``collab_bench.guard``, off by default; :mod:`.guard`). After each update
  the step's KL (``guard/kl``: ``actor/kl_loss`` with ``actor.use_kl_loss``, else
  ``actor/ppo_kl``) is judged by
  :meth:`KLGuard.check_step <baselines.rl.core.guard.KLGuard.check_step>`, before verl saves the
  step or sends its weights to the rollout servers; after each validation its ``eval/task/TR`` is
  judged by ``check_eval``. A failure restores the last checkpoint that passed into the workers
  (actor, and critic if any), lowers the actor's learning rate (``set_actor_lr``, :mod:`.workers`)
  and the critic's by the same factor
  (``set_critic_lr``) and saves that state at the current step;
  once ``max_rollbacks`` are spent, the next failure restores and ends training. Under the
  guard only weights that passed are checkpointed: the starting weights as step 0, and a step
  that is validated is saved after its validation passed. So the newest checkpoint is always
  the last that passed, whatever verl prunes. Each checkpoint holds the guard's bookkeeping
  (``collab_bench_guard.json``) for a resumed run. Every step logs ``guard/*``.

verl compares ``trainer_mode`` with ``"sync"`` to choose the replay buffer, the dataloader's batch
(asynchronous modes fetch one prompt at a time, which would split episodes across batches) and
what a checkpoint holds. So once verl has found the trainer by its registered name, the trainer
sets ``trainer.v1.trainer_mode`` back to ``sync`` and runs exactly as verl's sync mode.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import ray
import transfer_queue as tq
from omegaconf import DictConfig
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1 import PPOTrainerSync, register_trainer
from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

from baselines.rl.core.guard import Decision, KLGuard
from baselines.verl.guard import decision_metrics, guard_settings, read_state, write_state
from baselines.verl.metrics import EVAL_PREFIX, INDEX_KEY, batch_metrics, guard_readings
from baselines.verl.workers import CollabBenchActorWorker, CollabBenchCriticWorker

TRAINER_NAME = "collab_bench_sync"
VERL_MODE = "sync"  # the verl trainer mode this trainer runs as
ACTOR_ROLES = (Role.ActorRollout, Role.ActorRolloutRef, Role.Actor)  # verl's actor worker roles


def extra_fields(batch: KVBatchMeta) -> list[dict[str, Any]]:
    """The ``extra_fields`` dict of every sample of ``batch`` in TransferQueue, the padding rows
    (tag ``is_padding``) left out."""
    keys = [k for k, tag in zip(batch.keys, batch.tags, strict=True) if not tag.get("is_padding")]
    if not keys:
        return []
    data = tq.kv_batch_get(
        keys=keys, partition_id=batch.partition_id, select_fields=["extra_fields"]
    )
    # As verl reads it (pop, then tolist): indexing the TensorDict gives a lazy stack instead.
    return list(data.pop("extra_fields").tolist())


def say(line: str) -> None:
    """A console line of the guard (the task runner's stdout, which Ray forwards to the driver)."""
    print(f"[collab_bench guard] {line}", flush=True)


@register_trainer(TRAINER_NAME)
class CollabBenchTrainer(PPOTrainerSync):
    """verl's sync trainer with CollabBench's step and validation metrics and the KL guard
    (see the module docstring). ``config`` is verl's whole trainer config."""

    def __init__(self, config: DictConfig) -> None:
        config.trainer.v1.trainer_mode = VERL_MODE
        super().__init__(config)
        self.last_eval: dict[str, float] = {}  # the latest validation's eval/* metrics
        settings = guard_settings(config)
        lr = float(config.actor_rollout_ref.actor.optim.lr)
        self.guard = KLGuard(settings, lr=lr) if settings.enabled else None
        self._start_lr = lr  # the guard's rate, the actor's, is this times its factor
        self._critic_lr = float(config.critic.optim.lr) if self.use_critic else None
        self.guard_stop: str | None = None  # why the guard ended training, if it did
        self._saved_at: int | None = None  # the global step of the last checkpoint saved
        self._held_back: int | None = None  # a step whose checkpoint waits for its validation
        self._restored_at: int | None = None  # a step whose weights came from a checkpoint

    # ------------------------------------------------------------------ metrics
    def _compute_metrics(
        self,
        batch: KVBatchMeta,
        metrics: dict[str, Any],
        timing_raw: dict[str, float],
        global_steps: int,
        epoch: int,
    ) -> None:
        super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
        metrics.update(collab_metrics(extra_fields(batch)))

    def _validate(self) -> dict[str, float]:
        kept: list[dict[str, Any]] = []
        buffer = self.replay_buffer
        sample = buffer.sample

        def sample_and_keep(*args: Any, **kwargs: Any) -> tuple[KVBatchMeta, dict]:
            batch, aux = sample(*args, **kwargs)
            kept.extend(extra_fields(batch))
            return batch, aux

        # verl's _validate reads each batch and clears it from TransferQueue before the next:
        # the moment the buffer hands a batch out is the one place to read its samples.
        buffer.sample = sample_and_keep
        try:
            metrics = super()._validate()
        finally:
            del buffer.sample
        self.last_eval = batch_metrics({"extra_fields": kept}, prefix=EVAL_PREFIX) if kept else {}
        metrics = {**metrics, **self.last_eval}
        if self.guard is not None:
            metrics.update(self._judge_validation())
        return metrics

    # ------------------------------------------------------------------ the KL guard
    def _init_resource_pool_mgr(self) -> None:
        super()._init_resource_pool_mgr()
        if self.guard is not None:  # the workers that can lower their learning rates
            for role in ACTOR_ROLES:
                if role in self.role_worker_mapping:
                    self.role_worker_mapping[role] = ray.remote(CollabBenchActorWorker)
            if Role.Critic in self.role_worker_mapping:
                self.role_worker_mapping[Role.Critic] = ray.remote(CollabBenchCriticWorker)

    def step(self, metrics: dict[str, Any], timing_raw: dict[str, float]) -> KVBatchMeta:
        batch = super().step(metrics, timing_raw)
        use_kl_loss = bool(self.config.actor_rollout_ref.actor.use_kl_loss)
        readings = guard_readings(metrics, self.last_eval, use_kl_loss)
        metrics.update(readings)
        # verl updates the actor only from step trainer.critic_warmup on: before, nothing moved.
        updated = self.config.trainer.critic_warmup <= self.global_steps
        if self.guard is not None and updated:
            if "guard/kl" not in readings:
                raise RuntimeError(
                    f"step {self.global_steps}: the KL guard judges actor/"
                    f"{'kl_loss' if use_kl_loss else 'ppo_kl'}, which the update did not log "
                    f"(actor keys: {sorted(k for k in metrics if k.startswith('actor/'))})"
                )
            decision = self.guard.check_step(self.global_steps, readings["guard/kl"])
            metrics.update(self._carry_out(decision, replicas_awake=False))
        return batch

    def _judge_validation(self) -> dict[str, float]:
        """After a validation at this step: judge its held-out TR, unless the weights were just
        loaded from a checkpoint (they passed), then save the step's held-back checkpoint if
        they passed. The rollout servers are awake with the weights now."""
        step = self.global_steps
        out: dict[str, float] = {}
        if self._restored_at != step:
            decision = self.guard.check_eval(step, self.last_eval.get(INDEX_KEY))
            out = self._carry_out(decision, replicas_awake=True)
        if self._held_back == step:
            self._with_replicas_asleep(self._save_passing)
        return out

    def _carry_out(self, decision: Decision, replicas_awake: bool) -> dict[str, float]:
        """Log ``decision``; on a failure restore the checkpoint it names with its learning
        rate and save that state at this step, and on a stop end training after this step.
        Returns the decision's ``guard/*`` metrics."""
        say(f"step {decision.step}: {decision.action}: {decision.reason}")
        if not decision.passed:
            if decision.restore_step is not None:

                def restore_and_save() -> None:
                    self.restore_checkpoint(decision.restore_step, lr=decision.lr)
                    self._restored_at = self.global_steps
                    self._save_passing()

                if replicas_awake:
                    self._with_replicas_asleep(restore_and_save)
                else:
                    restore_and_save()
            if decision.action == "stop":
                self.guard_stop = decision.reason
                # fit's loop runs while global_steps <= total_training_steps.
                self.total_training_steps = self.global_steps
        return decision_metrics(decision)

    def _with_replicas_asleep(self, work: Callable[[], None]) -> None:
        """Run ``work`` on the workers as verl loads checkpoints: the rollout replicas asleep
        (their GPU memory free), then woken with the actor's weights."""
        self.checkpoint_manager.sleep_replicas()
        work()
        self.checkpoint_manager.update_weights(self.global_steps)

    def restore_checkpoint(self, step: int, lr: float | None = None) -> None:
        """Load the actor's (and the critic's) weights and optimiser state saved at global step
        ``step`` into the workers, then set the actor's base learning rate to ``lr`` and the
        critic's to the same fraction of its configured rate (None: the checkpoint's). Unlike
        verl's resume (``_load_checkpoint``), the step count, the data position and
        TransferQueue stay as they are; the caller sends the restored weights to the rollout
        servers (``on_step_end`` does after a step)."""
        folder = self._step_folder(step)
        actor = os.path.join(folder, "actor")
        if not os.path.isdir(actor):
            raise FileNotFoundError(f"no actor checkpoint of step {step} at {actor}")
        self.actor_rollout_wg.load_checkpoint(local_path=actor, del_local_after_load=False)
        if self.use_critic:
            critic = os.path.join(folder, str(Role.Critic))
            self.critic_wg.load_checkpoint(local_path=critic, del_local_after_load=False)
        if lr is not None:
            self._set_lr(lr)

    def _set_lr(self, lr: float) -> None:
        """Make ``lr`` the actor's base learning rate, and the critic's configured rate times
        the same factor (``lr`` over the actor's configured rate) the critic's."""
        per_rank = self.actor_rollout_wg.set_actor_lr(lr=lr)  # each rank: its groups' rates
        say(f"actor learning rate: base {lr:.3g}, now {per_rank[0][0]:.3g} (with the schedule)")
        if self._critic_lr is not None:
            critic = self._critic_lr * lr / self._start_lr
            per_rank = self.critic_wg.set_critic_lr(lr=critic)
            say(f"critic learning rate: base {critic:.3g}, now {per_rank[0][0]:.3g}")

    def _save_checkpoint(self) -> None:
        """verl's save, which fit calls after a step. Under the guard a step that a rollback
        saved already is not saved again, and a step that is validated next waits for its
        validation (:meth:`_judge_validation`): only weights that passed are saved."""
        step = self.global_steps
        if self.guard is None:
            super()._save_checkpoint()
        elif self._saved_at != step:
            if self._validated_now():
                self._held_back = step
            else:
                self._save_passing()

    def _validated_now(self) -> bool:
        """Whether fit validates after this step (its own condition)."""
        freq = self.config.trainer.test_freq
        step = self.global_steps
        return freq > 0 and (step >= self.total_training_steps or step % freq == 0)

    def _save_passing(self) -> None:
        """Save the current weights, which passed, at this step, with the guard's state."""
        super()._save_checkpoint()
        step = self.global_steps
        self._saved_at, self._held_back = step, None
        self.guard.checkpoint_saved(step)
        write_state(self._step_folder(step), self.guard, step)

    def _load_checkpoint(self) -> None:
        """verl's resume, then the guard's: its state saved with the resumed checkpoint (or,
        saved without the guard, that checkpoint as the first that passed) and the actor's
        learning rate from it; a run from scratch saves its starting weights as step 0."""
        super()._load_checkpoint()
        if self.guard is None:
            return
        folder = self._resumed_folder()
        if folder is None:
            self._save_passing()
            return
        state = read_state(folder)
        if state is None:
            self.guard.checkpoint_saved(self.global_steps)
        else:
            self.guard.load_state_dict(state)
        self._restored_at = self.global_steps
        self._set_lr(self.guard.lr)
        say(
            f"resumed at step {self.global_steps}: {self.guard.rollbacks} rollbacks so far, "
            f"lr {self.guard.lr:.3g}"
        )

    def _resumed_folder(self) -> str | None:
        """The checkpoint folder verl's ``_load_checkpoint`` resumed from (None: none)."""
        trainer = self.config.trainer
        if trainer.resume_mode == "auto":
            return find_latest_ckpt_path(os.path.abspath(trainer.default_local_dir))
        if trainer.resume_mode == "resume_path":
            return os.path.abspath(trainer.resume_from_path)
        return None

    def _step_folder(self, step: int) -> str:
        return os.path.join(self.config.trainer.default_local_dir, f"global_step_{step}")

    def on_train_end(self) -> None:
        super().on_train_end()
        if self.guard_stop is not None:
            say(f"training stopped at step {self.total_training_steps}: {self.guard_stop}")


def collab_metrics(fields: list[dict[str, Any]]) -> dict[str, float]:
    """A training batch's collaboration metrics from its samples' ``extra_fields``: the runner's
    names (``task/SR``, ``collab/B``, ...) and ``charts/episodes``, the episode copies."""
    if not fields:
        return {}
    out = batch_metrics({"extra_fields": fields})
    out["charts/episodes"] = out.pop("episodes")
    return out
