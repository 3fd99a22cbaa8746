"""verl's synchronous V1 trainer with CollabBench's metrics in its logs, and the KL guard's hook.

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
* **The KL guard's hook.** After each update, :meth:`CollabBenchTrainer.should_roll_back`
  receives the step's metrics with the guard's readings and decides whether to restore the last
  saved checkpoint. That happens before verl saves the step's checkpoint or sends the weights to
  the rollout servers. This trainer never rolls back; the guard overrides the method.

verl compares ``trainer_mode`` with ``"sync"`` to choose the replay buffer, the dataloader's batch
(asynchronous modes fetch one prompt at a time, which would split episodes across batches) and
what a checkpoint holds. So once verl has found the trainer by its registered name, the trainer
sets ``trainer.v1.trainer_mode`` back to ``sync`` and runs exactly as verl's sync mode.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import transfer_queue as tq
from omegaconf import DictConfig
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1 import PPOTrainerSync, register_trainer

from baselines.verl.metrics import EVAL_PREFIX, batch_metrics, guard_readings

TRAINER_NAME = "collab_bench_sync"
VERL_MODE = "sync"  # the verl trainer mode this trainer runs as


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


@register_trainer(TRAINER_NAME)
class CollabBenchTrainer(PPOTrainerSync):
    """verl's sync trainer with CollabBench's step and validation metrics and the KL guard's
    hook (see the module docstring). ``config`` is verl's whole trainer config."""

    def __init__(self, config: DictConfig) -> None:
        config.trainer.v1.trainer_mode = VERL_MODE
        super().__init__(config)
        self.last_eval: dict[str, float] = {}  # the latest validation's eval/* metrics
        self.saved_steps: list[int] = []  # global steps with a checkpoint, oldest first

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
        return {**metrics, **self.last_eval}

    # ------------------------------------------------------------------ the KL guard's hook
    def step(self, metrics: dict[str, Any], timing_raw: dict[str, float]) -> KVBatchMeta:
        batch = super().step(metrics, timing_raw)
        use_kl_loss = bool(self.config.actor_rollout_ref.actor.use_kl_loss)
        readings = guard_readings(metrics, self.last_eval, use_kl_loss)
        if self.should_roll_back({**self.last_eval, **metrics, **readings}):
            if not self.saved_steps:
                raise RuntimeError(
                    f"step {self.global_steps}: should_roll_back asked to restore a checkpoint, "
                    f"but none was saved yet (trainer.save_freq={self.config.trainer.save_freq})"
                )
            self.restore_checkpoint(self.saved_steps[-1])
        return batch

    def should_roll_back(self, metrics: Mapping[str, float]) -> bool:
        """The KL guard's decision after update ``self.global_steps``: True restores the last
        saved checkpoint (:meth:`restore_checkpoint`) before the step's checkpoint is saved and
        its weights reach the rollout servers.

        ``metrics``: the step's metrics (verl's ``actor/*`` among them), the latest
        validation's ``eval/*``, and the guard's readings (:func:`~.metrics.guard_readings`):
        ``guard/kl``, the KL to the reference (``actor/kl_loss`` with ``actor.use_kl_loss``,
        else ``actor/ppo_kl``), and ``guard/index``, the latest validation's ``eval/task/TR``
        (absent before the first validation). This trainer never rolls back.
        """
        return False

    def restore_checkpoint(self, step: int) -> None:
        """Load the actor's (and the critic's) weights and optimiser state saved at global step
        ``step`` into the workers. Unlike verl's resume (``_load_checkpoint``), the step count,
        the data position and TransferQueue stay as they are; ``on_step_end`` then sends the
        restored weights to the rollout servers. The learning rate is the checkpoint's."""
        folder = os.path.join(self.config.trainer.default_local_dir, f"global_step_{step}")
        actor = os.path.join(folder, "actor")
        if not os.path.isdir(actor):
            raise FileNotFoundError(f"no actor checkpoint of step {step} at {actor}")
        self.actor_rollout_wg.load_checkpoint(local_path=actor, del_local_after_load=False)
        if self.use_critic:
            critic = os.path.join(folder, str(Role.Critic))
            self.critic_wg.load_checkpoint(local_path=critic, del_local_after_load=False)

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()
        self.saved_steps.append(self.global_steps)

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()
        if self.global_steps > 0:  # resumed from that step's checkpoint
            self.saved_steps.append(self.global_steps)


def collab_metrics(fields: list[dict[str, Any]]) -> dict[str, float]:
    """A training batch's collaboration metrics from its samples' ``extra_fields``: the runner's
    names (``task/SR``, ``collab/B``, ...) and ``charts/episodes``, the episode copies."""
    if not fields:
        return {}
    out = batch_metrics({"extra_fields": fields})
    out["charts/episodes"] = out.pop("episodes")
    return out
