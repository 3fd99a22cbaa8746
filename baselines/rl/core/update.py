"""One policy update on a batch of samples, shared by GRPO, PPO and SPPO.

Advantages (the algorithm's estimator), old (and reference) logprobs, then ``ppo_epochs``
passes of minibatch losses and optimiser steps. The algorithm's parts are looked up by
``trainer.name`` in ``baselines/rl/core/algos.py`` (``ALGORITHMS``): its advantage estimator, its
policy loss and whether it trains a value head.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch

from baselines.rl.core import algos
from baselines.rl.core.algos import ALGORITHMS
from baselines.rl.core.config import AlgoSettings
from baselines.rl.core.policy import Policy
from baselines.rl.core.samples import Batch, per_unit


def _params(names: tuple[str, ...], algo: AlgoSettings) -> dict[str, Any]:
    """The trainer settings ``names`` as keyword arguments of a registered function."""
    return {name: getattr(algo, name) for name in names}


@dataclass
class Targets:
    """What the loss of a minibatch compares against, per sample of the batch.

    adv: (B,) sequence advantages or (B, T) token advantages; weight: (B,) sample weights;
    unit_size: (B,) the number of samples of each sample's unit in the batch; old_logp: (B, T)
    or None when the loss forward is the old policy (one pass over one minibatch); ref_logp:
    (B, T) reference logprobs (KL term) or None; returns, old_values: (B, T) value targets and
    old values (value head) or None.
    """

    adv: torch.Tensor
    weight: torch.Tensor
    unit_size: torch.Tensor
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    old_values: torch.Tensor | None = None

    def select(self, idx: torch.Tensor, width: int) -> Targets:
        """The rows ``idx``, token tensors cut to ``width`` positions."""

        def cut(v: torch.Tensor | None) -> torch.Tensor | None:
            if v is None:
                return None
            return v[idx][:, :width] if v.dim() == 2 else v[idx]

        return Targets(*(cut(getattr(self, f)) for f in self.__dataclass_fields__))


def group_advantages(batch: Batch, algo: AlgoSettings) -> tuple[torch.Tensor, torch.Tensor]:
    """(B,) sequence advantages of a group-relative estimator (zeros for a value-based one,
    whose token advantages need the old values) and the (B,) bool mask of the samples kept
    (zero-variance groups dropped when ``filter_zero_variance``)."""
    estimator = ALGORITHMS[algo.name].estimator
    keep = torch.ones(len(batch), dtype=torch.bool)
    if not estimator.group_relative:
        return torch.zeros(len(batch)), keep
    if algo.filter_zero_variance:
        keep = per_unit(batch, algos.nonzero_variance_groups).bool()
    return per_unit(batch, estimator.fn, **_params(estimator.params, algo)), keep


@torch.no_grad()
def score(
    policy: Policy, batch: Batch, minibatch_size: int, values: bool, reference: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(B, T) logprobs of the batch under the current (or reference) weights, in minibatches,
    and the (B, T) values of the value head when ``values`` (else None)."""
    logps, vals = [], []
    width = batch.input_ids.shape[1]
    for k in range(0, len(batch), minibatch_size):
        part = batch.select(torch.arange(k, min(k + minibatch_size, len(batch))))
        out = policy.forward(
            part.input_ids,
            part.attention_mask,
            values=values and not reference,
            entropy=False,
            reference=reference,
            prompt_lengths=part.prompt_lengths(),
        )
        logps.append(torch.nn.functional.pad(out.logp.cpu(), (0, width - out.logp.shape[1])))
        if out.values is not None:
            vals.append(torch.nn.functional.pad(out.values.cpu(), (0, width - out.values.shape[1])))
    return torch.cat(logps), (torch.cat(vals) if vals else None)


@torch.no_grad()
def reference_kl(policy: Policy, batch: Batch, minibatch_size: int) -> float:
    """Mean over the batch's generated tokens of the exact KL(policy || reference) in nats
    between the next-token distributions over the vocabulary (:meth:`Policy.reference_kl`),
    in minibatches: one forward pass of each model over the batch."""
    total, tokens = 0.0, 0.0
    for k in range(0, len(batch), minibatch_size):
        part = batch.select(torch.arange(k, min(k + minibatch_size, len(batch))))
        kl = policy.reference_kl(part.input_ids, part.attention_mask, part.prompt_lengths())
        total += float((kl.cpu() * part.mask).sum())
        tokens += float(part.mask.sum())
    return total / max(tokens, 1.0)


def minibatch_loss(
    policy: Policy, part: Batch, targets: Targets, algo: AlgoSettings
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one minibatch (policy loss, value loss, KL and entropy terms) and its
    statistics (``losses/*``, clip fraction, approximate KL to the old policy)."""
    algorithm = ALGORITHMS[algo.name]
    out = policy.forward(
        part.input_ids,
        part.attention_mask,
        values=algorithm.value_head,
        entropy=True,
        entropy_grad=algo.entropy_coef > 0,
        prompt_lengths=part.prompt_lengths(),
    )
    dev = out.logp.device
    mask = part.mask.to(dev)
    # One pass over one minibatch: the old policy is the current one (ratio 1).
    old = out.logp.detach() if targets.old_logp is None else targets.old_logp.to(dev)
    adv = targets.adv.to(dev)
    policy_loss_fn = algorithm.loss
    params = _params(policy_loss_fn.params, algo)
    if policy_loss_fn.per_token:
        if adv.dim() == 1:
            adv = adv.unsqueeze(-1).expand_as(mask)
        weighted = mask * targets.weight.to(dev).unsqueeze(-1)
        policy_loss = policy_loss_fn.fn(out.logp, old, adv, weighted, **params)
    else:
        unit_size = targets.unit_size.to(dev)
        policy_loss = policy_loss_fn.fn(out.logp, old, adv, mask, unit_size=unit_size, **params)
    loss = policy_loss
    stats = {"losses/policy": policy_loss.item()}
    if algorithm.value_head:
        assert out.values is not None
        assert targets.old_values is not None and targets.returns is not None
        value_loss = algos.clipped_value_loss(
            out.values,
            targets.old_values.to(dev),
            targets.returns.to(dev),
            mask,
            algo.value_clip,
            algo.loss_agg,
        )
        loss = loss + algo.vf_coef * value_loss
        stats["losses/value"] = value_loss.item()
    if algo.kl_coef > 0:
        assert targets.ref_logp is not None
        kl = algos.aggregate(
            algos.kl_penalty(out.logp, targets.ref_logp.to(dev), algo.kl_estimator),
            mask,
            algo.loss_agg,
        )
        loss = loss + algo.kl_coef * kl
        stats["losses/kl"] = kl.item()
    entropy = algos.aggregate(out.entropy, mask, "token-mean")
    if algo.entropy_coef > 0:
        loss = loss - algo.entropy_coef * entropy
    stats["losses/entropy"] = entropy.item()
    stats["losses/total"] = loss.item()
    with torch.no_grad():
        log_ratio = (out.logp - old) * mask
        n = mask.sum().clamp(min=1)
        ratio = torch.exp(log_ratio)
        clipped = ((ratio < 1 - algo.clip_low) | (ratio > 1 + algo.clip_high)).float() * mask
        stats["charts/clip_frac"] = float(clipped.sum() / n)
        stats["charts/approx_kl"] = float(((ratio - 1) - log_ratio).mul(mask).sum() / n)
    return loss, stats


def update_policy(
    policy: Policy,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    algo: AlgoSettings,
    order_seed: int,
    grad_norm_history: list[float],
) -> tuple[dict[str, float], list[float]]:
    """Advantages and ``ppo_epochs`` of minibatch updates of ``policy`` on ``batch``.

    Args:
        order_seed: seeds the minibatch order.
        grad_norm_history: recent gradient norms (the spike ratio's baseline).
    Returns:
        (statistics, the gradient norm of every optimiser step, none if every sample was
        dropped).
    """
    algorithm = ALGORITHMS[algo.name]
    t0 = time.perf_counter()
    adv, keep = group_advantages(batch, algo)
    stats: dict[str, float] = {
        "charts/zero_variance_frac": 1.0 - float(keep.float().mean()),
        "charts/samples": float(keep.sum()),
        "charts/group_reward_std": float(per_unit(batch, algos.group_std).mean()),
    }
    if not keep.any():
        stats["perf/logprob_s"] = time.perf_counter() - t0
        stats["perf/update_s"] = 0.0
        return stats, []
    idx = torch.nonzero(keep).squeeze(-1)
    batch, adv = batch.select(idx), adv[idx]
    weight = torch.ones(len(batch))
    if algo.balance_trajectories:
        weight = algos.trajectory_weights(batch.unit)
    targets = Targets(adv, weight, algos.unit_sizes(batch.unit))
    single_pass = (
        algo.ppo_epochs == 1 and len(batch) <= algo.minibatch_size and not algorithm.value_head
    )
    mask = batch.mask
    old_values = None
    if not single_pass:
        targets.old_logp, old_values = score(
            policy, batch, algo.minibatch_size, algorithm.value_head
        )
        stats["charts/logprob_mismatch"] = float(
            ((targets.old_logp - batch.rollout_logp).abs() * mask).sum() / mask.sum()
        )
    if algo.kl_coef > 0:
        targets.ref_logp, _ = score(policy, batch, algo.minibatch_size, False, reference=True)
    if algorithm.value_head:
        assert old_values is not None
        estimator = algorithm.estimator
        targets.adv, targets.returns = estimator.fn(
            batch.rewards, old_values * mask, mask, **_params(estimator.params, algo)
        )
        targets.old_values = old_values * mask
        stats["charts/value_mean"] = float((old_values * mask).sum() / mask.sum())
    stats["charts/advantage_abs"] = float(targets.adv.abs().mean())
    t1 = time.perf_counter()
    stats["perf/logprob_s"] = t1 - t0
    order_gen = torch.Generator().manual_seed(order_seed)
    totals: dict[str, list[float]] = {}
    norms = []
    for _ in range(algo.ppo_epochs):
        order = torch.randperm(len(batch), generator=order_gen)
        for k in range(0, len(batch), algo.minibatch_size):
            rows = order[k : k + algo.minibatch_size]
            part = batch.select(rows)
            policy.model.train()
            part_targets = targets.select(rows, part.input_ids.shape[1])
            loss, s = minibatch_loss(policy, part, part_targets, algo)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(list(policy.parameters()), algo.max_grad_norm)
            optimizer.step()
            policy.model.eval()
            norms.append(float(norm))
            for key, v in s.items():
                totals.setdefault(key, []).append(v)
    stats.update({k: sum(v) / len(v) for k, v in totals.items()})
    stats["charts/grad_norm"] = max(norms)
    base = statistics.median(grad_norm_history) if grad_norm_history else max(norms)
    stats["charts/grad_norm_spike"] = max(norms) / (base + 1e-8)
    stats["perf/update_s"] = time.perf_counter() - t1
    stats["perf/train_tokens_per_s"] = (
        algo.ppo_epochs * float(batch.attention_mask.sum()) / max(stats["perf/update_s"], 1e-9)
    )
    return stats, norms
