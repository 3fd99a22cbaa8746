"""The per-agent reward of one tick, as a pure function."""

from __future__ import annotations

from collections.abc import Sequence


def tick_rewards(
    gained: Sequence[int],
    n_atoms: int,
    alpha: float,
    success_bonus: float,
    completed: bool,
) -> list[float]:
    """Rewards of every agent for one tick.

    r_i = alpha * team_progress + (1 - alpha) * own_credit_i + bonus, where

    * team_progress = sum_j gained_j / n_atoms: the change in satisfied checklist atoms this
      tick, as a fraction of the checklist;
    * own_credit_i = gained_i / n_atoms: the atoms agent i's own actions satisfied this tick,
      minus those they undid;
    * bonus = ``success_bonus`` for every agent on the tick the checklist becomes complete.

    Args:
        gained: per agent, atoms its actions made true minus atoms they made false this tick.
        n_atoms: checklist size (an empty checklist counts as one atom).
        alpha: the team share ``reward_sharing``, in [0, 1].
        success_bonus: the bonus for completing the checklist.
        completed: whether the checklist became complete during this tick.
    Returns:
        One reward per agent, in agent order.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha={alpha} must be in [0, 1]")
    size = max(1, n_atoms)
    team = sum(gained) / size
    bonus = success_bonus if completed else 0.0
    return [alpha * team + (1 - alpha) * g / size + bonus for g in gained]
