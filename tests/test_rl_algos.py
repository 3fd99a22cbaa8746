"""The RL math against hand-computed values on small tensors, edge cases included, and the
registries the trainer dispatches through."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from baselines.rl.core import algos
from baselines.rl.core.algos import (
    ADVANTAGES,
    AGGREGATIONS,
    ALGORITHMS,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    Algorithm,
    aggregate,
    clipped_policy_loss,
    clipped_value_loss,
    gae,
    gae_advantages,
    group_stats,
    group_std,
    grpo_advantages,
    kl_penalty,
    masked_whiten,
    nonzero_variance_groups,
    sppo_advantages,
    sppo_loss,
    sppo_targets,
    trajectory_weights,
    unit_sizes,
)
from baselines.rl.core.config import AlgoSettings


def t(*values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def rows(*values, width: int) -> torch.Tensor:
    return t(*values).reshape(-1, width)


# ---------------------------------------------------------------------- group statistics
def test_group_stats_are_per_group_mean_and_unbiased_std() -> None:
    # Interleaved group ids: {1, 3} in group 0, {5, 2} in group 1, {7} alone in group 2.
    rewards, groups = t(1.0, 5.0, 3.0, 2.0, 7.0), torch.tensor([0, 1, 0, 1, 2])
    mean, std = group_stats(rewards, groups)
    assert mean.tolist() == pytest.approx([2.0, 3.5, 2.0, 3.5, 7.0])
    s0, s1 = math.sqrt(2.0), math.sqrt(4.5)  # unbiased: divide by n - 1 = 1
    assert std.tolist() == pytest.approx([s0, s1, s0, s1, 0.0])
    assert group_std(rewards, groups).tolist() == pytest.approx([s0, s1, s0, s1, 0.0])


def test_zero_variance_and_single_sample_groups_are_filtered() -> None:
    keep = nonzero_variance_groups(t(1.0, 2.0, 2.0, 2.0, 7.0), torch.tensor([0, 0, 1, 1, 2]))
    assert keep.tolist() == [True, True, False, False, False]


def test_trajectory_weights_make_every_unit_weigh_the_same() -> None:
    # B = 6 samples of U = 3 units with 3, 1 and 2 samples: (B / U) / n_u.
    weights = trajectory_weights(torch.tensor([3, 3, 8, 3, 5, 5]))
    assert weights.tolist() == pytest.approx([2 / 3, 2 / 3, 2.0, 2 / 3, 1.0, 1.0])
    assert float(weights.sum()) == pytest.approx(6.0)
    assert trajectory_weights(torch.tensor([4, 9])).tolist() == [1.0, 1.0]


def test_masked_whiten_uses_generated_tokens_only_and_the_population_std() -> None:
    values = rows(1.0, 2.0, 100.0, 3.0, 4.0, 5.0, width=3)
    mask = rows(1.0, 1.0, 0.0, 1.0, 0.0, 1.0, width=3)
    # Masked values 1, 2, 3, 5: mean 2.75, population variance 8.75 / 4.
    mean, std = 2.75, math.sqrt(8.75 / 4)
    expected = [(1 - mean) / (std + 1e-6), (2 - mean) / (std + 1e-6), 0.0]
    expected += [(3 - mean) / (std + 1e-6), 0.0, (5 - mean) / (std + 1e-6)]
    assert masked_whiten(values, mask).flatten().tolist() == pytest.approx(expected)


# ---------------------------------------------------------------------- advantages
def test_grpo_normalises_within_groups() -> None:
    rewards, groups = t(1.0, 3.0, 5.0, 2.0), torch.tensor([0, 0, 1, 1])
    adv = grpo_advantages(rewards, groups)
    s = math.sqrt(2.0)  # unbiased std of {1, 3}
    assert adv[:2].tolist() == pytest.approx([-1 / (s + 1e-6), 1 / (s + 1e-6)])
    s2 = math.sqrt(((5 - 3.5) ** 2 + (2 - 3.5) ** 2) / 1)
    assert adv[2:].tolist() == pytest.approx([1.5 / (s2 + 1e-6), -1.5 / (s2 + 1e-6)])


def test_grpo_without_norm_by_std_only_centres() -> None:
    rewards, groups = t(1.0, 3.0, 5.0, 2.0), torch.tensor([0, 0, 1, 1])
    assert grpo_advantages(rewards, groups, norm_by_std=False).tolist() == pytest.approx(
        [-1, 1, 1.5, -1.5]
    )


def test_grpo_edge_cases_single_and_zero_variance_groups() -> None:
    rewards, groups = t(4.0, 2.0, 2.0, 1.0), torch.tensor([0, 1, 1, 2])
    assert grpo_advantages(rewards, groups).tolist() == [0.0, 0.0, 0.0, 0.0]
    assert grpo_advantages(rewards, groups, norm_by_std=False).tolist() == [0.0, 0.0, 0.0, 0.0]


def test_sppo_subtracts_the_soft_mean() -> None:
    rewards, groups = t(0.0, 1.0), torch.tensor([0, 0])
    soft = math.log((math.exp(0.0) + math.exp(2.0)) / 2) / 2.0
    assert sppo_advantages(rewards, groups, beta=2.0).tolist() == pytest.approx([-soft, 1 - soft])
    assert sppo_advantages(t(3.0), torch.tensor([5]), beta=1.0).tolist() == pytest.approx([0.0])
    # Two groups, each against its own soft mean (beta = 1: log of the mean of exp).
    adv = sppo_advantages(t(0.0, 2.0, 1.0, 1.0), torch.tensor([0, 1, 0, 1]))
    soft0, soft1 = math.log((1 + math.e) / 2), 1.5 + math.log((math.exp(0.5) + math.exp(-0.5)) / 2)
    assert adv.tolist() == pytest.approx([-soft0, 2 - soft1, 1 - soft0, 1 - soft1])


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


def test_ppo_advantages_are_whitened_gae_and_returns_are_not() -> None:
    # Zero values, gamma = lam = 1: GAE is the reward to go, [[1, 1], [3, 3]]; whitened over the
    # four tokens (mean 2, population std 1) it is [[-1, -1], [1, 1]] / (1 + 1e-6).
    rewards = rows(0.0, 1.0, 0.0, 3.0, width=2)
    zeros, mask = torch.zeros_like(rewards), torch.ones_like(rewards)
    adv, returns = gae_advantages(rewards, zeros, mask, gamma=1.0, lam=1.0)
    unit = 1 / (1 + 1e-6)
    assert adv.flatten().tolist() == pytest.approx([-unit, -unit, unit, unit])
    assert returns.flatten().tolist() == pytest.approx([1.0, 1.0, 3.0, 3.0])


# ---------------------------------------------------------------------- aggregation
def test_aggregation_modes() -> None:
    loss = rows(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, width=3)
    mask = rows(1.0, 1.0, 0.0, 1.0, 1.0, 1.0, width=3)
    assert aggregate(loss, mask, "token-mean").item() == pytest.approx((1 + 2 + 4 + 5 + 6) / 5)
    assert aggregate(loss, mask, "seq-mean-token-sum").item() == pytest.approx((3 + 15) / 2)
    assert aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx((1.5 + 5) / 2)
    assert aggregate(loss, mask, "seq-mean-token-sum-norm").item() == pytest.approx(18 / 6)
    assert aggregate(loss, mask).item() == pytest.approx(18 / 5)  # token-mean by default
    with pytest.raises(ValueError, match="unknown aggregation 'median'; valid: token-mean"):
        aggregate(loss, mask, "median")


def test_aggregation_of_one_token_and_empty_sequences() -> None:
    loss = rows(3.0, 2.0, 5.0, 4.0, width=2)
    mask = rows(1.0, 0.0, 0.0, 0.0, width=2)  # the second sequence counts as 0, not NaN
    assert aggregate(loss, mask, "token-mean").item() == pytest.approx(3.0)
    assert aggregate(loss, mask, "seq-mean-token-sum").item() == pytest.approx(1.5)
    assert aggregate(loss, mask, "seq-mean-token-mean").item() == pytest.approx(1.5)
    assert aggregate(loss, mask, "seq-mean-token-sum-norm").item() == pytest.approx(0.75)
    for mode in AGGREGATIONS:
        assert aggregate(loss, torch.zeros_like(mask), mode).item() == 0.0


# ---------------------------------------------------------------------- losses
RATIOS = (1.5, 0.5, 5.0)


def _policy_loss(adv: float, **kwargs) -> float:
    logp = torch.log(t(*RATIOS)).reshape(1, 3)
    old = torch.zeros(1, 3, dtype=torch.float64)
    ones = torch.ones(1, 3, dtype=torch.float64)
    return clipped_policy_loss(logp, old, adv * ones, ones, **kwargs).item()


def test_clipped_policy_loss_clips_the_ratio() -> None:
    # A = +1: max(-r, -clip(r)) = -min(r, clip(r)) -> -1.2, -0.5, -1.2
    assert _policy_loss(1.0, dual_clip=None) == pytest.approx((-1.2 - 0.5 - 1.2) / 3)
    # A = -1: max(r, clip(r)) -> 1.5, 0.8, 5.0
    assert _policy_loss(-1.0, dual_clip=None) == pytest.approx((1.5 + 0.8 + 5.0) / 3)


def test_clip_low_and_clip_high_bound_their_own_sides() -> None:
    # Upper bound 1 + clip_high = 1.28 caps the gain of a positive advantage.
    assert _policy_loss(1.0, clip_low=0.3, clip_high=0.28, dual_clip=None) == pytest.approx(
        (-1.28 - 0.5 - 1.28) / 3
    )
    # Lower bound 1 - clip_low = 0.7 for a negative advantage (0.8 if the sides were swapped).
    assert _policy_loss(-1.0, clip_low=0.3, clip_high=0.2, dual_clip=None) == pytest.approx(
        (1.5 + 0.7 + 5.0) / 3
    )


def test_dual_clip_caps_negative_advantages_only() -> None:
    # A = -1, c = 3: the 5.0 term is capped at -A c = 3.
    assert _policy_loss(-1.0, dual_clip=3.0) == pytest.approx((1.5 + 0.8 + 3.0) / 3)
    # A = -2: terms 3.0, 1.6, 10.0; the cap scales with A: -A c = 6.
    assert _policy_loss(-2.0, dual_clip=3.0) == pytest.approx((3.0 + 1.6 + 6.0) / 3)
    # A = +1: the dual clip leaves positive advantages alone.
    assert _policy_loss(1.0, dual_clip=3.0) == pytest.approx((-1.2 - 0.5 - 1.2) / 3)
    for bad in (1.0, 0.5):
        with pytest.raises(ValueError, match=f"dual_clip={bad} must be > 1"):
            _policy_loss(-1.0, dual_clip=bad)


def test_clipped_policy_loss_aggregates_with_loss_agg() -> None:
    total = -1.2 - 0.5 - 1.2
    assert _policy_loss(1.0, loss_agg="seq-mean-token-sum") == pytest.approx(total)
    logp = torch.log(t(*RATIOS, 1.0)).reshape(2, 2)
    mask = rows(1.0, 1.0, 1.0, 0.0, width=2)
    loss = clipped_policy_loss(logp, torch.zeros_like(logp), torch.ones_like(logp), mask)
    assert loss.item() == pytest.approx(total / 3)  # token-mean over the three masked tokens


def test_clipped_value_loss_takes_the_larger_of_clipped_and_unclipped() -> None:
    def value_loss(v: float, old: float, ret: float, **kwargs) -> float:
        one = torch.ones(1, 1, dtype=torch.float64)
        return clipped_value_loss(v * one, old * one, ret * one, one, **kwargs).item()

    # Unclipped (2 - 1.5)^2 = 0.25 beats clipped V = 1.2: (1.2 - 1.5)^2 = 0.09.
    assert value_loss(2.0, 1.0, 1.5, clip=0.2) == pytest.approx(0.125)
    # Clipped V = 1.2 is further from R = 2.5: 0.5 * 1.69; with clip 0.5, V = 1.5: 0.5 * 1.0.
    assert value_loss(2.0, 1.0, 2.5, clip=0.2) == pytest.approx(0.845)
    assert value_loss(2.0, 1.0, 2.5, clip=0.5) == pytest.approx(0.5)
    # Below the old value: clipped V = 0.8, R = -1: 0.5 * 1.8^2 beats 0.5 * 1^2.
    assert value_loss(0.0, 1.0, -1.0, clip=0.2) == pytest.approx(1.62)


def test_clipped_value_loss_aggregates_with_loss_agg() -> None:
    values, returns = rows(1.0, 2.0, 3.0, 0.0, width=2), torch.zeros(2, 2, dtype=torch.float64)
    mask = rows(1.0, 1.0, 1.0, 0.0, width=2)
    # old = values: no clipping; per token 0.5 V^2 = 0.5, 2.0, 4.5.
    token_mean = clipped_value_loss(values, values, returns, mask, clip=0.2)
    seq_sum = clipped_value_loss(values, values, returns, mask, 0.2, "seq-mean-token-sum")
    assert token_mean.item() == pytest.approx(7.0 / 3)
    assert seq_sum.item() == pytest.approx((2.5 + 4.5) / 2)


def test_sppo_per_decision_regresses_each_log_ratio_to_eta_times_the_advantage() -> None:
    logp = rows(0.1, 0.2, -0.3, 0.0, width=2)
    old = torch.zeros(2, 2, dtype=torch.float64)
    mask = rows(1.0, 1.0, 1.0, 0.0, width=2)
    adv = t(0.5, -1.0)
    per_decision = {"sppo_target": "per_decision"}
    expected = ((0.3 - 0.5) ** 2 + (-0.3 + 1.0) ** 2) / 2
    assert sppo_loss(logp, old, adv, mask, eta=1.0, **per_decision).item() == pytest.approx(
        expected
    )
    expected = ((0.3 - 1.0) ** 2 + (-0.3 + 2.0) ** 2) / 2
    assert sppo_loss(logp, old, adv, mask, eta=2.0, **per_decision).item() == pytest.approx(
        expected
    )
    # The earlier formula, bit for bit, whatever the unit sizes.
    earlier = ((((logp - old) * mask).sum(-1) - 2.0 * adv) ** 2).mean()
    sizes = t(3.0, 1.0)
    assert torch.equal(sppo_loss(logp, old, adv, mask, 2.0, "per_decision", sizes), earlier)


def test_sppo_per_trajectory_spreads_the_target_over_the_trajectory() -> None:
    # Unit 7: three decisions with A = 0.6; unit 2: one decision with A = -1; unit 5: two
    # decisions with A = 0.25.
    units = torch.tensor([7, 2, 7, 5, 7, 5])
    adv = t(0.6, -1.0, 0.6, 0.25, 0.6, 0.25)
    sizes = unit_sizes(units)
    assert sizes.tolist() == [3.0, 1.0, 3.0, 2.0, 3.0, 2.0]
    target = sppo_targets(adv, eta=2.0, sppo_target="per_trajectory", unit_size=sizes)
    assert target.tolist() == pytest.approx([0.4, -2.0, 0.4, 0.25, 0.4, 0.25])
    for unit, unit_adv in ((7, 0.6), (2, -1.0), (5, 0.25)):
        assert float(target[units == unit].sum()) == pytest.approx(2.0 * unit_adv)
    assert sppo_targets(adv, 2.0, "per_decision", sizes).tolist() == pytest.approx(
        (2.0 * adv).tolist()
    )
    # The loss regresses each decision's summed token log-ratio to its share.
    logp = rows(0.1, 0.2, -0.5, 0.0, 0.3, 0.0, 0.1, 0.1, 0.0, 0.0, 0.2, 0.0, width=2)
    old = torch.zeros_like(logp)
    mask = rows(1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, width=2)
    log_ratio = [0.3, -0.5, 0.3, 0.2, 0.0, 0.2]
    shares = [0.4, -2.0, 0.4, 0.25, 0.4, 0.25]
    expected = sum((x - y) ** 2 for x, y in zip(log_ratio, shares, strict=True)) / 6
    loss = sppo_loss(logp, old, adv, mask, eta=2.0, unit_size=sizes)
    assert loss.item() == pytest.approx(expected)
    # One-decision units get the same target either way.
    single = unit_sizes(torch.tensor([0, 1, 2]))
    assert torch.equal(
        sppo_targets(t(0.5, -1.0, 2.0), 1.5, "per_trajectory", single),
        sppo_targets(t(0.5, -1.0, 2.0), 1.5, "per_decision", single),
    )


def test_sppo_target_errors_name_the_option() -> None:
    with pytest.raises(ValueError, match=r"sppo_target='mean' must be one of \['per_trajectory'"):
        sppo_targets(t(1.0), 1.0, "mean", t(1.0))
    with pytest.raises(ValueError, match="sppo_target='per_trajectory' needs unit_size"):
        sppo_targets(t(1.0), 1.0, "per_trajectory", None)


# ---------------------------------------------------------------------- KL
def test_kl_estimators() -> None:
    logp, ref = t(-1.0, -2.0), t(-1.5, -1.0)
    lr = [0.5, -1.0]
    assert kl_penalty(logp, ref, "k1").tolist() == pytest.approx(lr)
    assert kl_penalty(logp, ref, "k2").tolist() == pytest.approx([0.125, 0.5])
    assert kl_penalty(logp, ref, "k3").tolist() == pytest.approx([math.exp(-x) + x - 1 for x in lr])
    assert kl_penalty(logp, ref).tolist() == pytest.approx([math.exp(-x) + x - 1 for x in lr])
    for name in KL_ESTIMATORS:
        assert kl_penalty(logp, logp, name).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="unknown KL estimator 'k4'; valid: k1, k2, k3"):
        kl_penalty(logp, ref, "k4")


# ---------------------------------------------------------------------- registries
def test_each_trainer_combines_its_estimator_loss_and_value_head() -> None:
    table = {n: (a.advantage, a.policy_loss, a.value_head) for n, a in ALGORITHMS.items()}
    assert table == {
        "grpo": ("grpo", "clipped", False),
        "ppo": ("gae", "clipped", True),
        "sppo": ("sppo", "sppo", False),
    }
    assert ALGORITHMS["ppo"].estimator.fn is gae_advantages
    assert ALGORITHMS["sppo"].loss.fn is sppo_loss
    assert ALGORITHMS["grpo"].estimator.fn is grpo_advantages
    assert ALGORITHMS["grpo"].loss.fn is clipped_policy_loss


def test_registered_functions_declare_how_they_are_called() -> None:
    assert {n: (e.params, e.group_relative) for n, e in ADVANTAGES.items()} == {
        "grpo": (("norm_by_std",), True),
        "sppo": (("beta",), True),
        "gae": (("gamma", "lam"), False),
    }
    assert {n: (p.params, p.per_token) for n, p in POLICY_LOSSES.items()} == {
        "clipped": (("clip_low", "clip_high", "dual_clip", "loss_agg"), True),
        "sppo": (("eta", "sppo_target"), False),
    }
    fields = {f.name for f in dataclasses.fields(AlgoSettings)}
    for entry in [*ADVANTAGES.values(), *POLICY_LOSSES.values()]:
        assert set(entry.params) <= fields
    assert set(AGGREGATIONS) == {
        "token-mean",
        "seq-mean-token-sum",
        "seq-mean-token-mean",
        "seq-mean-token-sum-norm",
    }


def test_consistent_algorithms_are_accepted_and_inconsistent_ones_rejected() -> None:
    # A group-relative estimator may feed either loss; a value-based one needs a token loss.
    assert Algorithm("grpo", "sppo", value_head=False).loss.per_token is False
    assert Algorithm("gae", "clipped", value_head=True).estimator.group_relative is False
    with pytest.raises(ValueError, match="advantage='gae' needs value_head=True"):
        Algorithm("gae", "clipped", value_head=False)
    with pytest.raises(ValueError, match="advantage='grpo' needs value_head=False"):
        Algorithm("grpo", "clipped", value_head=True)
    with pytest.raises(ValueError, match="policy_loss='sppo' takes one advantage per sequence"):
        Algorithm("gae", "sppo", value_head=True)
    with pytest.raises(ValueError, match="unknown advantage estimator 'vtrace'; valid: grpo"):
        Algorithm("vtrace", "clipped", value_head=False)
    with pytest.raises(ValueError, match="unknown policy loss 'reinforce'; valid: clipped, sppo"):
        Algorithm("grpo", "reinforce", value_head=False)


def test_registering_adds_a_named_entry(monkeypatch) -> None:
    monkeypatch.setattr(algos, "ADVANTAGES", {})
    monkeypatch.setattr(algos, "POLICY_LOSSES", {})

    @algos.register_advantage("mean", params=())
    def mean_baseline(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
        return rewards - rewards.mean()

    @algos.register_policy_loss("pg", params=(), per_token=True)
    def pg(logp, old_logp, advantages, mask) -> torch.Tensor:
        return -(logp * advantages * mask).sum()

    assert dict(algos.ADVANTAGES) == {"mean": algos.AdvantageEstimator(mean_baseline, (), True)}
    assert dict(algos.POLICY_LOSSES) == {"pg": algos.PolicyLoss(pg, (), True)}
    assert Algorithm("mean", "pg", value_head=False).estimator.fn is mean_baseline
