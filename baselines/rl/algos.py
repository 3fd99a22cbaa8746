"""The RL math of the trainers: advantages, losses, KL estimators and loss aggregation.

Pure functions over tensors, found by name through registries. Shapes: ``B`` sequences
(samples), ``T`` token positions; ``mask`` is 1 on generated tokens and 0 elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

EPS = 1e-6
KL_ESTIMATORS = ("k1", "k2", "k3")
AGGREGATIONS = (
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)


def _group_stats(
    rewards: torch.Tensor, groups: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample group mean, unbiased group std (0 for groups of one) and group size."""
    mean = torch.zeros_like(rewards)
    std = torch.zeros_like(rewards)
    size = torch.zeros_like(rewards)
    for g in torch.unique(groups):
        idx = groups == g
        r = rewards[idx]
        mean[idx] = r.mean()
        std[idx] = r.std() if len(r) > 1 else 0.0
        size[idx] = len(r)
    return mean, std, size


def grpo_advantages(
    rewards: torch.Tensor, groups: torch.Tensor, norm_by_std: bool = True
) -> torch.Tensor:
    """GRPO: A_i = (R_i - mean_g R) / (std_g R + 1e-6); without ``norm_by_std`` (Dr.GRPO)
    A_i = R_i - mean_g R. A group of one has no baseline and gets A = 0.

    Args:
        rewards: (B,) episode returns.
        groups: (B,) integer group ids (same episode seed, optionally agent / turn).
    Returns:
        (B,) advantages.
    """
    mean, std, _ = _group_stats(rewards, groups)
    centred = rewards - mean
    return centred / (std + EPS) if norm_by_std else centred


def sppo_advantages(rewards: torch.Tensor, groups: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """SPPO: A_i = R_i - (1 / beta) * log mean_g exp(beta * R). Shapes: (B,) -> (B,)."""
    out = torch.zeros_like(rewards)
    for g in torch.unique(groups):
        idx = groups == g
        r = rewards[idx]
        soft = (torch.logsumexp(beta * r, 0) - torch.log(torch.tensor(float(len(r))))) / beta
        out[idx] = r - soft
    return out


def nonzero_variance_groups(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(B,) bool mask of samples whose group's rewards are not all equal (DAPO-style dynamic
    sampling drops the others: they carry no group-relative signal)."""
    _, std, size = _group_stats(rewards, groups)
    return (std > 0) & (size > 1)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over generated tokens only.

    Positions with ``mask == 0`` are skipped: the recursion links each generated token to the
    next generated one. Args: rewards, values, mask: (B, T). Returns (advantages, returns), both
    (B, T) and zero where ``mask == 0``.
    """
    B, T = rewards.shape
    adv = torch.zeros_like(rewards)
    for b in range(B):
        next_value = 0.0
        running = 0.0
        for t in reversed(range(T)):
            if mask[b, t] == 0:
                continue
            delta = rewards[b, t] + gamma * next_value - values[b, t]
            running = delta + gamma * lam * running
            adv[b, t] = running
            next_value = values[b, t]
    returns = (adv + values) * mask
    return adv, returns


def aggregate(loss: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean") -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar.

    token-mean: sum(loss * mask) / sum(mask); seq-mean-token-sum: mean over sequences of their
    token sums; seq-mean-token-mean: mean over sequences of their token means;
    seq-mean-token-sum-norm: sum(loss * mask) / (B * T) (a constant normaliser, as in Dr.GRPO).
    """
    masked = loss * mask
    if mode == "token-mean":
        return masked.sum() / mask.sum().clamp(min=1)
    if mode == "seq-mean-token-sum":
        return masked.sum(-1).mean()
    if mode == "seq-mean-token-mean":
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if mode == "seq-mean-token-sum-norm":
        return masked.sum() / (mask.shape[0] * mask.shape[1])
    raise ValueError(f"unknown aggregation {mode!r}; valid modes are {list(AGGREGATIONS)}")


def clipped_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
    mode: str = "token-mean",
) -> torch.Tensor:
    """PPO's clipped surrogate with asymmetric clipping and the dual clip for negative
    advantages: per token max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high)), capped at -A c
    where A < 0. All inputs (B, T); returns a scalar."""
    ratio = torch.exp(logp - old_logp)
    loss = torch.maximum(
        -advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    )
    if dual_clip is not None:
        if dual_clip <= 1:
            raise ValueError(f"dual_clip={dual_clip} must be > 1")
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * dual_clip), loss)
    return aggregate(loss, mask, mode)


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    mode: str = "token-mean",
) -> torch.Tensor:
    """0.5 * max((V - R)^2, (V_old + clip(V - V_old, -clip, clip) - R)^2), aggregated. (B, T)."""
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    loss = 0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
    return aggregate(loss, mask, mode)


def sppo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eta: float = 1.0,
) -> torch.Tensor:
    """mean_i (sum_t mask * (log pi - log pi_old) - eta * A_i)^2. logp, old_logp, mask: (B, T);
    advantages: (B,)."""
    log_ratio = ((logp - old_logp) * mask).sum(-1)
    return ((log_ratio - eta * advantages) ** 2).mean()


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(pi || pi_ref) estimates (B, T): k1 = log r, k2 = (log r)^2 / 2,
    k3 = exp(-log r) + log r - 1, with log r = log pi - log pi_ref."""
    log_ratio = logp - ref_logp
    if estimator == "k1":
        return log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio**2
    if estimator == "k3":
        return torch.exp(-log_ratio) + log_ratio - 1
    raise ValueError(f"unknown KL estimator {estimator!r}; valid: {', '.join(KL_ESTIMATORS)}")


ADVANTAGES: dict[str, Callable[..., torch.Tensor]] = {
    "grpo": grpo_advantages,
    "sppo": sppo_advantages,
}
POLICY_LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "clipped": clipped_policy_loss,
    "sppo": sppo_loss,
}
