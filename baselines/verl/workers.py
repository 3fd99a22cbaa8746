"""verl's actor and critic workers with one more call: set the learning rate while training runs.

verl 0.9.1's workers have no call that changes the learning rate. The actor's optimiser and its
schedule live in the FSDP engine inside each ``ActorRolloutRefWorker`` Ray actor
(``worker.actor.engine.optimizer`` and ``.lr_scheduler``: a torch optimiser with one parameter
group and a ``LambdaLR`` with warmup, constant or cosine). :class:`CollabBenchActorWorker` adds
``set_actor_lr``, registered like verl's own calls (``@register``, sent to every rank), so the
trainer reaches it as ``actor_rollout_wg.set_actor_lr(lr=...)``. verl hard-codes the worker
class in the trainer's ``_init_resource_pool_mgr``; the CollabBench trainer puts this class in
its place when the KL guard is on (:mod:`.trainer`). The critic of PPO (verl's
``TrainingWorker``, its engine as ``worker.engine``) gets the same call as ``set_critic_lr``
(:class:`CollabBenchCriticWorker`), so that a rollback lowers both rates by the same factor, as
the CPU trainer's one optimiser per policy (value head included) does.

The change is to the schedule's base rate, so the schedule's own factor (warmup, decay) keeps
applying, and it travels in verl's checkpoints: the optimiser's and the scheduler's state dicts
hold it.
"""

from __future__ import annotations

import torch
from torch.optim.lr_scheduler import LRScheduler
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker


def set_base_lr(
    optimizer: torch.optim.Optimizer, scheduler: LRScheduler | None, lr: float
) -> list[float]:
    """Make ``lr`` the base learning rate of every parameter group of ``optimizer`` and of
    ``scheduler``'s schedule, keeping the schedule's current factor: a group at half its base
    rate (in warmup, say) stays at half of ``lr``. Returns the groups' learning rates now."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer: a torch optimizer is needed, not {type(optimizer).__name__}")
    if scheduler is not None and not isinstance(scheduler, LRScheduler):
        raise TypeError(
            f"lr_scheduler: a torch LRScheduler is needed, not {type(scheduler).__name__}"
        )
    if not lr > 0:
        raise ValueError(f"lr={lr!r} must be > 0")
    groups = optimizer.param_groups
    for i, group in enumerate(groups):
        base = scheduler.base_lrs[i] if scheduler is not None else group.get("initial_lr")
        group["lr"] = group["lr"] * lr / base if base else lr
        if "initial_lr" in group:  # what a schedule built later would start from
            group["initial_lr"] = lr
    if scheduler is not None:
        # LambdaLR and its kin compute every later rate as base_lrs[i] * factor(step).
        scheduler.base_lrs = [lr] * len(groups)
        scheduler._last_lr = [group["lr"] for group in groups]
    return [group["lr"] for group in groups]


class CollabBenchActorWorker(ActorRolloutRefWorker):
    """verl's actor/rollout/reference worker with :meth:`set_actor_lr`."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def set_actor_lr(self, lr: float) -> list[float]:
        """Set the actor's base learning rate to ``lr`` on this rank (:func:`set_base_lr`);
        returns the parameter groups' learning rates now."""
        if "actor" not in self.role:
            raise RuntimeError(f"set_actor_lr: this worker's role {self.role!r} has no actor")
        engine = self.actor.engine
        return set_base_lr(engine.optimizer, engine.lr_scheduler, lr)


class CollabBenchCriticWorker(TrainingWorker):
    """verl's critic worker (a ``TrainingWorker`` of the value model) with
    :meth:`set_critic_lr`."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def set_critic_lr(self, lr: float) -> list[float]:
        """Set the critic's base learning rate to ``lr`` on this rank (:func:`set_base_lr`);
        returns the parameter groups' learning rates now."""
        return set_base_lr(self.engine.optimizer, self.engine.lr_scheduler, lr)
