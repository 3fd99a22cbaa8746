"""The declared metrics: name, namespace, range, definition and level of every metric.

This is the one list of metrics. :mod:`benchmark.metrics.episode` computes them,
and everything that names metrics derives from here: the logger keys (``<namespace>/<name>``),
the summary's columns, its interval method and the clipping of its intervals to each range.

Levels:

* ``episode``: computed from one trace (:func:`benchmark.metrics.episode.episode_metrics`);
* ``reference``: computed from one episode and the one-agent reference run of the same baseline,
  task, scene, seed and comm setting (:func:`benchmark.metrics.episode.add_reference_metrics`);
* ``run``: computed over a run's episodes (:func:`benchmark.metrics.episode.specialisation`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NAMESPACES = ("task", "collab", "comm")
LEVELS = ("episode", "reference", "run")
INTERVALS = ("t", "clopper_pearson")


@dataclass(frozen=True)
class Range:
    """The values a metric can take: ``low <= value <= high`` (either end may be infinite)."""

    name: str
    low: float
    high: float

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise ValueError(f"Range {self.name!r}: low={self.low} must be below high={self.high}")

    def clip(self, lo: float, hi: float) -> tuple[float, float]:
        """An interval ``[lo, hi]`` cut to this range."""
        return max(self.low, lo), min(self.high, hi)


FRACTION = Range("fraction in [0, 1]", 0.0, 1.0)
COUNT = Range("non-negative count", 0.0, math.inf)
NON_NEGATIVE = Range("non-negative real", 0.0, math.inf)
AT_MOST_ONE = Range("real at most 1", -math.inf, 1.0)
REAL = Range("unbounded real", -math.inf, math.inf)


@dataclass(frozen=True)
class MetricSpec:
    """One metric.

    Attributes:
        name: the metric's name in result rows (``SR``, ``workload_gini``).
        namespace: its logger namespace, one of :data:`NAMESPACES`.
        range: the values it can take; summary intervals are clipped to it.
        level: what it is computed from, one of :data:`LEVELS`.
        definition: what the metric measures, in words.
        interval: the summary's 95% interval: ``t`` (Student-t) or ``clopper_pearson`` (for
            success indicators).
        headline: shown in the summary.md table (every metric is in summary.csv).
    """

    name: str
    namespace: str
    range: Range
    level: str
    definition: str
    interval: str = "t"
    headline: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"MetricSpec.name must be an identifier, got {self.name!r}")
        if self.namespace not in NAMESPACES:
            raise ValueError(
                f"MetricSpec {self.name}: namespace {self.namespace!r} is not one of {NAMESPACES}"
            )
        if self.level not in LEVELS:
            raise ValueError(f"MetricSpec {self.name}: level {self.level!r} is not one of {LEVELS}")
        if self.interval not in INTERVALS:
            raise ValueError(
                f"MetricSpec {self.name}: interval {self.interval!r} is not one of {INTERVALS}"
            )
        if self.interval == "clopper_pearson" and self.range != FRACTION:
            raise ValueError(f"MetricSpec {self.name}: a Clopper-Pearson interval needs 0/1 values")
        if not self.definition:
            raise ValueError(f"MetricSpec {self.name}: definition must not be empty")

    @property
    def key(self) -> str:
        """The logger key, ``<namespace>/<name>``."""
        return f"{self.namespace}/{self.name}"


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "SR",
        "task",
        FRACTION,
        "episode",
        "1 if every checklist atom holds at the end, else 0",
        interval="clopper_pearson",
        headline=True,
    ),
    MetricSpec(
        "TR", "task", FRACTION, "episode", "satisfied atoms / atoms at the end", headline=True
    ),
    MetricSpec(
        "C",
        "task",
        FRACTION,
        "episode",
        "target objects some agent successfully acted on / target objects; failed actions do "
        "not count",
        headline=True,
    ),
    MetricSpec(
        "B",
        "collab",
        FRACTION,
        "episode",
        "min_i s_i / (max_i s_i + 1e-4), every agent counted, s_i the atoms credited to agent i",
        headline=True,
    ),
    MetricSpec("L", "task", COUNT, "episode", "ticks to the end of the episode", headline=True),
    MetricSpec("L_decisions", "task", COUNT, "episode", "decisions (LLM calls for LLM agents)"),
    MetricSpec(
        "speedup",
        "collab",
        NON_NEGATIVE,
        "reference",
        "L_1 / L_n, L_1 from the successful one-agent reference run",
        headline=True,
    ),
    MetricSpec("parallel_efficiency", "collab", NON_NEGATIVE, "reference", "speedup / n"),
    MetricSpec("EI", "collab", AT_MOST_ONE, "reference", "1 - L_n / L_1"),
    MetricSpec(
        "workload_entropy",
        "collab",
        FRACTION,
        "episode",
        "H(p) / log n of p_i = s_i / sum_j s_j; undefined for one agent or nothing credited",
    ),
    MetricSpec(
        "workload_gini",
        "collab",
        FRACTION,
        "episode",
        "Gini coefficient of p_i = s_i / sum_j s_j; undefined when nothing is credited",
    ),
    MetricSpec(
        "redundancy",
        "collab",
        FRACTION,
        "episode",
        "share of checklist atoms attempted by more than one agent",
        headline=True,
    ),
    MetricSpec(
        "wasted_action_rate",
        "collab",
        FRACTION,
        "episode",
        "failed or no-progress (wait) decisions / all decisions",
    ),
    MetricSpec(
        "blocked_ticks",
        "collab",
        COUNT,
        "episode",
        "ticks agents spent blocked by another agent, summed over agents: a walking agent "
        "waiting for, or refused, a cell another agent holds or takes",
    ),
    MetricSpec(
        "collisions",
        "collab",
        COUNT,
        "episode",
        "steps refused by a same-tick conflict over a cell (two agents stepping into it, or one "
        "stepping in before its occupant left), summed over agents",
    ),
    MetricSpec("messages", "comm", COUNT, "episode", "messages sent", headline=True),
    MetricSpec("message_tokens", "comm", COUNT, "episode", "tokens of the messages sent"),
    MetricSpec(
        "influence_rate",
        "comm",
        FRACTION,
        "episode",
        "share of delivered (message, recipient) pairs after which the recipient's next subtask "
        "changes",
    ),
    MetricSpec(
        "specialisation",
        "collab",
        FRACTION,
        "run",
        "normalised mutual information between agent identity and subtask type over a run",
        headline=True,
    ),
)
BY_NAME = {m.name: m for m in METRICS}
if len(BY_NAME) != len(METRICS):
    raise ValueError("a metric is declared twice in METRICS")


def metric(name: str) -> MetricSpec:
    """The declaration of the metric called ``name``; raises ValueError for unknown names."""
    if name not in BY_NAME:
        raise ValueError(f"unknown metric {name!r}; declared metrics are {list(BY_NAME)}")
    return BY_NAME[name]


def at_level(*levels: str) -> tuple[MetricSpec, ...]:
    """The declared metrics of the given levels, in declaration order."""
    unknown = [level for level in levels if level not in LEVELS]
    if unknown:
        raise ValueError(f"unknown metric level(s) {unknown}; levels are {LEVELS}")
    return tuple(m for m in METRICS if m.level in levels)
