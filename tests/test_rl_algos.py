"""The RL math against hand-computed values on small tensors, edge cases included."""

from __future__ import annotations

import math

import pytest
import torch

from baselines.rl.algos import (
    aggregate,
    clipped_policy_loss,
    clipped_value_loss,
    gae,
    grpo_advantages,
    kl_penalty,
    nonzero_variance_groups,
    sppo_advantages,
    sppo_loss,
)


def t(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_grpo_normalises_within_groups() -> None:
    rewards, groups = t(1.0, 3.0, 5.0, 2.0), torch.tensor([0, 0, 1, 1])
    adv = grpo_advantages(rewards, groups)
    s = math.sqrt(2.0)  # unbiased std of {1, 3}
    assert adv[:2].tolist() == pytest.approx([-1 / (s + 1e-6), 1 / (s + 1e-6)])
    s2 = math.sqrt(((5 - 3.5) ** 2 + (2 - 3.5) ** 2) / 1)
    assert adv[2:].tolist() == pytest.approx([1.5 / (s2 + 1e-6), -1.5 / (s2 + 1e-6)])
    assert grpo_advantages(rewards, groups, norm_by_std=False).tolist() == pytest.approx(
        [-1, 1, 1.5, -1.5]
    )


def test_grpo_edge_cases_single_and_zero_variance_groups() -> None:
    rewards, groups = t(4.0, 2.0, 2.0, 1.0), torch.tensor([0, 1, 1, 2])
    adv = grpo_advantages(rewards, groups)
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert nonzero_variance_groups(
        t(1.0, 2.0, 2.0, 2.0, 7.0), torch.tensor([0, 0, 1, 1, 2])
    ).tolist() == [True, True, False, False, False]


def test_sppo_subtracts_the_soft_mean() -> None:
    rewards, groups = t(0.0, 1.0), torch.tensor([0, 0])
    soft = math.log((math.exp(0.0) + math.exp(2.0)) / 2) / 2.0
    assert sppo_advantages(rewards, groups, beta=2.0).tolist() == pytest.approx([-soft, 1 - soft])
    assert sppo_advantages(t(3.0), torch.tensor([5]), beta=1.0).tolist() == pytest.approx([0.0])


def test_gae_runs_over_generated_tokens_only() -> None:
    rewards = t(0.0, 0.0, 0.0, 1.0).reshape(1, 4)
    values = t(0.5, 9.0, 0.25, 0.75).reshape(1, 4)
    mask = t(1.0, 0.0, 1.0, 1.0).reshape(1, 4)  # position 1 is an observation token
    adv, ret = gae(rewards, values, mask, gamma=0.9, lam=0.5)
    d3 = 1.0 - 0.75
    d2 = 0.0 + 0.9 * 0.75 - 0.25
    d0 = 0.0 + 0.9 * 0.25 - 0.5
    a3, a2 = d3, d2 + 0.45 * d3
    a0 = d0 + 0.45 * a2
    assert adv[0].tolist() == pytest.approx([a0, 0.0, a2, a3])
    assert ret[0].tolist() == pytest.approx([a0 + 0.5, 0.0, a2 + 0.25, a3 + 0.75])


def test_aggregation_modes() -> None:
    loss = t(1.0, 2.0, 3.0, 4.0, 5.0, 6.0).reshape(2, 3)
    mask = t(1.0, 1.0, 0.0, 1.0, 1.0, 1.0).reshape(2, 3)
    assert aggregate(loss, mask, "token-mean").item() == pytest.approx((1 + 2 + 4 + 5 + 6) / 5)
    assert aggregate(loss, mask, "seq-mean-token-sum").item() == pytest.approx((3 + 15) / 2)
    assert aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx((1.5 + 5) / 2)
    assert aggregate(loss, mask, "seq-mean-token-sum-norm").item() == pytest.approx(18 / 6)
    with pytest.raises(ValueError, match="valid modes"):
        aggregate(loss, mask, "median")


def test_clipped_policy_loss_clips_and_dual_clips() -> None:
    old = torch.zeros(1, 3, dtype=torch.float64)
    logp = torch.log(t(1.5, 0.5, 5.0)).reshape(1, 3)  # ratios 1.5, 0.5, 5.0
    mask = torch.ones(1, 3, dtype=torch.float64)
    pos = torch.ones(1, 3, dtype=torch.float64)
    # A = +1: max(-r, -clip(r)) = -min(r, clip(r)) -> -1.2, -0.5, -1.2
    assert clipped_policy_loss(logp, old, pos, mask, 0.2, 0.2, None).item() == pytest.approx(
        (-1.2 - 0.5 - 1.2) / 3
    )
    neg = -pos
    # A = -1: max(r, clip(r)) -> 1.5, 0.8, 5.0; dual clip c=3 caps at 3
    assert clipped_policy_loss(logp, old, neg, mask, 0.2, 0.2, None).item() == pytest.approx(
        (1.5 + 0.8 + 5.0) / 3
    )
    assert clipped_policy_loss(logp, old, neg, mask, 0.2, 0.2, 3.0).item() == pytest.approx(
        (1.5 + 0.8 + 3.0) / 3
    )
    # asymmetric clip-higher: upper bound 1.28
    assert clipped_policy_loss(logp, old, pos, mask, 0.2, 0.28, None).item() == pytest.approx(
        (-1.28 - 0.5 - 1.28) / 3
    )


def test_clipped_value_loss_and_sppo_loss() -> None:
    values, old, ret = t(2.0).reshape(1, 1), t(1.0).reshape(1, 1), t(1.5).reshape(1, 1)
    mask = torch.ones(1, 1, dtype=torch.float64)
    # unclipped (2 - 1.5)^2 = 0.25; clipped V = 1.2 -> (1.2 - 1.5)^2 = 0.09; 0.5 * max = 0.125
    assert clipped_value_loss(values, old, ret, mask, clip=0.2).item() == pytest.approx(0.125)
    logp = t(0.1, 0.2, -0.3, 0.0).reshape(2, 2)
    m = t(1.0, 1.0, 1.0, 0.0).reshape(2, 2)
    adv = t(0.5, -1.0)
    expected = ((0.3 - 0.5) ** 2 + (-0.3 + 1.0) ** 2) / 2
    assert sppo_loss(
        logp, torch.zeros(2, 2, dtype=torch.float64), adv, m, eta=1.0
    ).item() == pytest.approx(expected)


def test_kl_estimators() -> None:
    logp, ref = t(-1.0, -2.0), t(-1.5, -1.0)
    lr = [0.5, -1.0]
    assert kl_penalty(logp, ref, "k1").tolist() == pytest.approx(lr)
    assert kl_penalty(logp, ref, "k2").tolist() == pytest.approx([0.125, 0.5])
    assert kl_penalty(logp, ref, "k3").tolist() == pytest.approx([math.exp(-x) + x - 1 for x in lr])
    assert kl_penalty(logp, logp, "k3").tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="k1, k2, k3"):
        kl_penalty(logp, ref, "k4")
