"""The per-tick reward (benchmark/env/rewards.py) as a pure function, with hand-computed values."""

from __future__ import annotations

import pytest

from benchmark.env.rewards import tick_rewards


def test_team_progress_and_own_credit_are_mixed_by_alpha() -> None:
    # 4 atoms; agent 0 satisfied one atom, agent 1 nothing: team 1/4, own 1/4 and 0.
    r = tick_rewards([1, 0], n_atoms=4, alpha=0.7, success_bonus=1.0, completed=False)
    assert r == pytest.approx([0.7 * 0.25 + 0.3 * 0.25, 0.7 * 0.25])


def test_alpha_one_shares_everything_and_alpha_zero_nothing() -> None:
    shared = tick_rewards([2, 0, 0], n_atoms=4, alpha=1.0, success_bonus=0.0, completed=False)
    assert shared == pytest.approx([0.5, 0.5, 0.5])
    selfish = tick_rewards([2, 0, 0], n_atoms=4, alpha=0.0, success_bonus=0.0, completed=False)
    assert selfish == pytest.approx([0.5, 0.0, 0.0])


def test_undoing_an_atom_is_negative_progress_for_the_team_and_the_actor() -> None:
    r = tick_rewards([0, -1], n_atoms=2, alpha=0.5, success_bonus=1.0, completed=False)
    assert r == pytest.approx([0.5 * -0.5, 0.5 * -0.5 + 0.5 * -0.5])


def test_the_success_bonus_goes_to_every_agent_on_the_completing_tick_only() -> None:
    done = tick_rewards([1, 0], n_atoms=1, alpha=0.7, success_bonus=2.0, completed=True)
    assert done == pytest.approx([1.0 + 2.0, 0.7 + 2.0])
    later = tick_rewards([0, 0], n_atoms=1, alpha=0.7, success_bonus=2.0, completed=False)
    assert later == [0.0, 0.0]


def test_an_empty_checklist_counts_as_one_atom_and_bad_alpha_is_rejected() -> None:
    assert tick_rewards([1], n_atoms=0, alpha=1.0, success_bonus=0.0, completed=False) == [1.0]
    with pytest.raises(ValueError, match="alpha"):
        tick_rewards([0], n_atoms=1, alpha=1.5, success_bonus=0.0, completed=False)
