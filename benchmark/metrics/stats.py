"""Confidence intervals for aggregated metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for a success rate; (0, 1) with no trials."""
    if trials == 0:
        return 0.0, 1.0
    alpha = 1 - level
    lo = (
        0.0
        if successes == 0
        else float(stats.beta.ppf(alpha / 2, successes, trials - successes + 1))
    )
    hi = (
        1.0
        if successes == trials
        else float(stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes))
    )
    return lo, hi


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Student-t interval of the mean; a single value gives a zero-width interval."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan")
    mean = float(x.mean())
    if len(x) == 1:
        return mean, mean
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x)))
    return mean - half, mean + half


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value for paired successes: of the discordant pairs, ``only_a``
    were solved by A alone and ``only_b`` by B alone; under no difference each side is a fair
    coin (binomial, p = 1/2). 1.0 when no pair is discordant."""
    if only_a < 0 or only_b < 0:
        raise ValueError(f"discordant counts must be >= 0, got {only_a} and {only_b}")
    n = only_a + only_b
    if n == 0:
        return 1.0
    return float(min(1.0, 2 * stats.binom.cdf(min(only_a, only_b), n, 0.5)))
