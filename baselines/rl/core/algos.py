"""The RL math of the trainers: advantages, losses, KL estimators and loss aggregation.

Pure functions over tensors, found by name through registries (``ADVANTAGES``,
``POLICY_LOSSES``, ``AGGREGATIONS``, ``KL_ESTIMATORS``); ``ALGORITHMS`` says which advantage
estimator and policy loss each trainer (``trainer.name``) combines. Shapes: ``B`` sequences
(samples), ``T`` token positions, ``U`` units (one return each: an agent trajectory or one
decision); ``mask`` is 1 on generated tokens and 0 elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

EPS = 1e-6

_Entry = TypeVar("_Entry")


def lookup(registry: dict[str, _Entry], name: str, kind: str) -> _Entry:
    """``registry[name]``, or a ValueError naming ``kind`` and the registered names."""
    if name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; valid: {', '.join(registry)}")
    return registry[name]


# ---------------------------------------------------------------------- group statistics
def group_stats(rewards: torch.Tensor, groups: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample statistics of the sample's group.

    Args:
        rewards: (B,) returns.
        groups: (B,) integer group ids.
    Returns:
        (mean, std), each (B,): the group's mean return and its unbiased std (0 for a group of
        one).
    """
    mean = torch.zeros_like(rewards)
    std = torch.zeros_like(rewards)
    for g in torch.unique(groups):
        idx = groups == g
        r = rewards[idx]
        mean[idx] = r.mean()
        std[idx] = r.std() if len(r) > 1 else 0.0
    return mean, std


def group_std(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(B,) the unbiased std of the returns of each sample's group, 0 for a group of one (the
    reward-variance collapse signal). rewards, groups: (B,)."""
    return group_stats(rewards, groups)[1]


def nonzero_variance_groups(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """(B,) bool mask of samples whose group's rewards are not all equal, so never a group of
    one (DAPO-style dynamic sampling drops the others: they carry no group-relative signal).
    rewards, groups: (B,)."""
    return group_std(rewards, groups) > 0


def unit_sizes(units: torch.Tensor) -> torch.Tensor:
    """(B,) float: n_u, the number of samples of each sample's unit. units: (B,) integer unit
    ids."""
    _, inverse, counts = torch.unique(units, return_inverse=True, return_counts=True)
    return counts[inverse].float()


def trajectory_weights(units: torch.Tensor) -> torch.Tensor:
    """(B,) sample weights under which every unit (an agent trajectory) weighs the same whatever
    its number of samples: (B / U) / n_u for a sample of unit u with n_u samples, so the
    weights sum to B. units: (B,) integer unit ids."""
    return (len(units) / len(torch.unique(units))) / unit_sizes(units)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(values - mean) / (std + 1e-6) over the positions where ``mask == 1``, with the masked
    mean and population std; 0 where ``mask == 0``. values, mask: (B, T) -> (B, T)."""
    n = mask.sum()
    mean = (values * mask).sum() / n
    std = (((values - mean) * mask) ** 2).sum().div(n).sqrt()
    return (values - mean) / (std + EPS) * mask


# ---------------------------------------------------------------------- advantage estimators
@dataclass(frozen=True)
class AdvantageEstimator:
    """A registered advantage function.

    ``group_relative``: ``fn(returns (U,), groups (U,), **params) -> (U,)``, one advantage per
    unit from the returns of its group (groups of equal returns can be filtered out).
    Otherwise ``fn(rewards (B, T), values (B, T), mask (B, T), **params) -> (advantages,
    returns)``, both (B, T), from a critic's values. ``params`` are the names of the trainer
    config fields passed as keyword arguments of the same name.
    """

    fn: Callable[..., Any]
    params: tuple[str, ...]
    group_relative: bool


ADVANTAGES: dict[str, AdvantageEstimator] = {}


def register_advantage(
    name: str, params: tuple[str, ...], group_relative: bool = True
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function in ``ADVANTAGES`` under ``name``."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        ADVANTAGES[name] = AdvantageEstimator(fn, params, group_relative)
        return fn

    return decorate


@register_advantage("grpo", params=("norm_by_std",))
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
    mean, std = group_stats(rewards, groups)
    centred = rewards - mean
    return centred / (std + EPS) if norm_by_std else centred


@register_advantage("sppo", params=("beta",))
def sppo_advantages(rewards: torch.Tensor, groups: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """SPPO: A_i = R_i - (1 / beta) * log mean_g exp(beta * R). Shapes: (B,) -> (B,)."""
    out = torch.zeros_like(rewards)
    for g in torch.unique(groups):
        idx = groups == g
        r = rewards[idx]
        soft = (torch.logsumexp(beta * r, 0) - torch.log(torch.tensor(float(len(r))))) / beta
        out[idx] = r - soft
    return out


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
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


@register_advantage("gae", params=("gamma", "lam"), group_relative=False)
def gae_advantages(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's advantages: :func:`gae`, whitened over the batch's generated tokens
    (:func:`masked_whiten`); the returns the value loss regresses to are not whitened.
    rewards, values, mask: (B, T). Returns (advantages, returns), both (B, T)."""
    adv, returns = gae(rewards, values, mask, gamma, lam)
    return masked_whiten(adv, mask), returns


# ---------------------------------------------------------------------- loss aggregation
def token_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum(loss * mask) / sum(mask) (0 when nothing is masked in). (B, T) -> scalar."""
    return (loss * mask).sum() / mask.sum().clamp(min=1)


def seq_mean_token_sum(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean over sequences of their masked token sums. (B, T) -> scalar."""
    return (loss * mask).sum(1).mean()


def seq_mean_token_mean(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean over sequences of their masked token means (a sequence with no masked token
    counts as 0). (B, T) -> scalar."""
    return ((loss * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()


def seq_mean_token_sum_norm(loss: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """sum(loss * mask) / (B * T): a constant normaliser, as in Dr.GRPO. (B, T) -> scalar."""
    return (loss * mask).sum() / (mask.shape[0] * mask.shape[1])


AGGREGATIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "token-mean": token_mean,
    "seq-mean-token-sum": seq_mean_token_sum,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum-norm": seq_mean_token_sum_norm,
}


def aggregate(loss: torch.Tensor, mask: torch.Tensor, mode: str = "token-mean") -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar with the aggregation ``mode`` (a key of
    ``AGGREGATIONS``)."""
    return lookup(AGGREGATIONS, mode, "aggregation")(loss, mask)


# ---------------------------------------------------------------------- policy and value losses
@dataclass(frozen=True)
class PolicyLoss:
    """A registered policy loss ``fn(logp, old_logp, advantages, mask, **params) -> scalar``.

    ``per_token``: advantages are (B, T) and ``mask`` carries the trajectory-balancing sample
    weights (mask * weight); otherwise advantages are (B,), one per sequence, ``mask`` is the
    plain loss mask, and the keyword ``unit_size`` (B,) gives the number of samples of each
    sample's unit in the whole update batch (:func:`unit_sizes`; a minibatch sees only part of
    a unit). ``params`` are trainer config fields passed by keyword.
    """

    fn: Callable[..., torch.Tensor]
    params: tuple[str, ...]
    per_token: bool


POLICY_LOSSES: dict[str, PolicyLoss] = {}


def register_policy_loss(
    name: str, params: tuple[str, ...], per_token: bool
) -> Callable[[Callable[..., torch.Tensor]], Callable[..., torch.Tensor]]:
    """Register the decorated function in ``POLICY_LOSSES`` under ``name``."""

    def decorate(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        POLICY_LOSSES[name] = PolicyLoss(fn, params, per_token)
        return fn

    return decorate


@register_policy_loss(
    "clipped", params=("clip_low", "clip_high", "dual_clip", "loss_agg"), per_token=True
)
def clipped_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = 3.0,
    loss_agg: str = "token-mean",
) -> torch.Tensor:
    """PPO's clipped surrogate with asymmetric clipping and the dual clip for negative
    advantages: per token max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high)), capped at -A c
    where A < 0, then aggregated with ``loss_agg``. All inputs (B, T); returns a scalar."""
    ratio = torch.exp(logp - old_logp)
    loss = torch.maximum(
        -advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    )
    if dual_clip is not None:
        if dual_clip <= 1:
            raise ValueError(f"dual_clip={dual_clip} must be > 1")
        loss = torch.where(advantages < 0, torch.minimum(loss, -advantages * dual_clip), loss)
    return aggregate(loss, mask, loss_agg)


SPPO_TARGETS = ("per_trajectory", "per_decision")


def sppo_targets(
    advantages: torch.Tensor,
    eta: float = 1.0,
    sppo_target: str = "per_trajectory",
    unit_size: torch.Tensor | None = None,
) -> torch.Tensor:
    """The log-ratio each sequence regresses to, (B,).

    SPPO's target eta * A belongs to a whole unit (an agent trajectory when A is its episode
    return). ``per_trajectory`` spreads it over the unit's n_u sequences, eta * A / n_u each,
    so that their summed log-ratio, the trajectory's, is regressed to eta * A.
    ``per_decision`` asks every sequence for the whole eta * A, so a trajectory of n_u
    decisions is pushed towards n_u * eta * A. The two agree when every unit is one sequence
    (``return_mode=to_go``, ``group_by`` with ``turn``).

    Args:
        advantages: (B,) the unit advantage of each sequence.
        eta: the target scale.
        sppo_target: ``per_trajectory`` or ``per_decision`` (``SPPO_TARGETS``).
        unit_size: (B,) n_u of each sequence's unit (:func:`unit_sizes`); per_trajectory only.
    """
    if sppo_target == "per_decision":
        return eta * advantages
    if sppo_target != "per_trajectory":
        raise ValueError(f"sppo_target={sppo_target!r} must be one of {list(SPPO_TARGETS)}")
    if unit_size is None:
        raise ValueError("sppo_target='per_trajectory' needs unit_size (the unit of each sample)")
    return eta * advantages / unit_size


@register_policy_loss("sppo", params=("eta", "sppo_target"), per_token=False)
def sppo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eta: float = 1.0,
    sppo_target: str = "per_trajectory",
    unit_size: torch.Tensor | None = None,
) -> torch.Tensor:
    """mean_i (sum_t mask * (log pi - log pi_old) - target_i)^2 with the :func:`sppo_targets`
    target_i: eta * A_i / n_u (per_trajectory) or eta * A_i (per_decision). logp, old_logp,
    mask: (B, T); advantages, unit_size: (B,)."""
    log_ratio = ((logp - old_logp) * mask).sum(-1)
    target = sppo_targets(advantages, eta, sppo_target, unit_size)
    return ((log_ratio - target) ** 2).mean()


def clipped_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    clip: float,
    loss_agg: str = "token-mean",
) -> torch.Tensor:
    """0.5 * max((V - R)^2, (V_old + clip(V - V_old, -clip, clip) - R)^2), aggregated with
    ``loss_agg``. All inputs (B, T); returns a scalar."""
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    loss = 0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
    return aggregate(loss, mask, loss_agg)


# ---------------------------------------------------------------------- KL to the reference
def kl_k1(log_ratio: torch.Tensor) -> torch.Tensor:
    """k1 = log r (unbiased, high variance). (B, T) -> (B, T)."""
    return log_ratio


def kl_k2(log_ratio: torch.Tensor) -> torch.Tensor:
    """k2 = (log r)^2 / 2. (B, T) -> (B, T)."""
    return 0.5 * log_ratio**2


def kl_k3(log_ratio: torch.Tensor) -> torch.Tensor:
    """k3 = exp(-log r) + log r - 1 (unbiased, non-negative). (B, T) -> (B, T)."""
    return torch.exp(-log_ratio) + log_ratio - 1


KL_ESTIMATORS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "k1": kl_k1,
    "k2": kl_k2,
    "k3": kl_k3,
}


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(pi || pi_ref) estimates (B, T) with the ``KL_ESTIMATORS`` entry
    ``estimator``, of log r = log pi - log pi_ref. logp, ref_logp: (B, T)."""
    return lookup(KL_ESTIMATORS, estimator, "KL estimator")(logp - ref_logp)


# ---------------------------------------------------------------------- algorithms
@dataclass(frozen=True)
class Algorithm:
    """A trainer: its advantage estimator (an ``ADVANTAGES`` key), its policy loss (a
    ``POLICY_LOSSES`` key) and whether the policy carries a value head (the critic that
    value-based estimators read and the clipped value loss trains)."""

    advantage: str
    policy_loss: str
    value_head: bool

    def __post_init__(self) -> None:
        estimator = lookup(ADVANTAGES, self.advantage, "advantage estimator")
        loss = lookup(POLICY_LOSSES, self.policy_loss, "policy loss")
        if self.value_head == estimator.group_relative:
            raise ValueError(
                f"advantage={self.advantage!r} needs value_head={not estimator.group_relative}"
            )
        if not estimator.group_relative and not loss.per_token:
            raise ValueError(
                f"policy_loss={self.policy_loss!r} takes one advantage per sequence; "
                f"advantage={self.advantage!r} gives one per token"
            )

    @property
    def estimator(self) -> AdvantageEstimator:
        return ADVANTAGES[self.advantage]

    @property
    def loss(self) -> PolicyLoss:
        return POLICY_LOSSES[self.policy_loss]


ALGORITHMS: dict[str, Algorithm] = {
    "grpo": Algorithm(advantage="grpo", policy_loss="clipped", value_head=False),
    "ppo": Algorithm(advantage="gae", policy_loss="clipped", value_head=True),
    "sppo": Algorithm(advantage="sppo", policy_loss="sppo", value_head=False),
}
