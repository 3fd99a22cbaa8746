"""Joining episode rows with their one-agent references (speedup, parallel efficiency, EI).

A row's reference is a successful one-agent episode of the same baseline, task, scene, seed and
comm setting: from the same run (a reference job, or a run row with one agent), or from a
previous run named by ``reference_from``, whose rows take precedence. The summary joins a whole
run at once (:func:`with_reference`); the loggers get the rows as the run goes
(:class:`ReferenceJoin`), each one as soon as its reference metrics are known.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchmark.metrics.episode import add_reference_metrics

Row = dict[str, Any]


def reference_key(row: Row) -> tuple[Any, ...]:
    """What a row and its reference share: baseline, task, scene, seed and comm setting."""
    return (row["baseline"], row["task"], row["scene"], row["seed"], row["comm"])


def serves_as_reference(row: Row) -> bool:
    """Whether ``row`` gives L_1: a successful one-agent episode."""
    return row["status"] == "ok" and row["n_agents"] == 1 and row.get("SR") == 1.0


def is_result(row: Row) -> bool:
    """Whether ``row`` is one of the run's results: an ok episode that is not a reference job."""
    return row["status"] == "ok" and not row["reference"]


def reference_ticks(rows: Iterable[Row]) -> dict[tuple[Any, ...], int]:
    """L_1 per reference key, from the rows that serve as references."""
    return {reference_key(r): r["L"] for r in rows if serves_as_reference(r)}


def with_reference(rows: Iterable[Row], references: Iterable[Row] = ()) -> list[Row]:
    """The result rows among ``rows``, each with its reference metrics (None without one).
    ``references`` are one-agent rows of a previous run; they win over the run's own."""
    rows = list(rows)
    ticks = {**reference_ticks(rows), **reference_ticks(references)}
    return [
        add_reference_metrics(dict(r), ticks.get(reference_key(r))) for r in rows if is_result(r)
    ]


class ReferenceJoin:
    """Releases a run's result rows, with their reference metrics, as the episodes finish.

    A result row is released as soon as its reference is known. While one-agent episodes of
    the run are still to come, a row without a known reference waits for them; once none is
    left, or at :meth:`flush`, the waiting rows are released without reference metrics. Every
    result row is released exactly once, and rows that are not results (reference jobs,
    errors) never are.

    Args:
        known: rows the run directory already holds (a resumed run); their one-agent
            episodes serve as references, and they are not released again.
        fixed: one-agent rows of the ``reference_from`` run; they win over the run's own.
        one_agent_jobs: one-agent episodes of this run still to come.
    """

    def __init__(self, known: Iterable[Row], fixed: Iterable[Row], one_agent_jobs: int) -> None:
        if one_agent_jobs < 0:
            raise ValueError(f"one_agent_jobs must be >= 0, got {one_agent_jobs}")
        self._fixed = reference_ticks(fixed)
        self._ticks = {**reference_ticks(known), **self._fixed}
        self._one_agent_left = one_agent_jobs
        self._waiting: list[Row] = []

    def add(self, row: Row) -> list[Row]:
        """Take one finished episode's row; returns the result rows ready to log now."""
        if row["n_agents"] == 1:
            if self._one_agent_left == 0:
                raise ValueError(f"more one-agent episodes than announced: {row.get('key')!r}")
            self._one_agent_left -= 1
        if serves_as_reference(row) and reference_key(row) not in self._fixed:
            self._ticks[reference_key(row)] = row["L"]
        if is_result(row):
            self._waiting.append(row)
        return self._release(everything=self._one_agent_left == 0)

    def flush(self) -> list[Row]:
        """The rows still waiting, released without the references that never came."""
        return self._release(everything=True)

    def _release(self, everything: bool) -> list[Row]:
        ready, waiting = [], []
        for row in self._waiting:
            key = reference_key(row)
            if key in self._ticks or everything:
                ready.append(add_reference_metrics(dict(row), self._ticks.get(key)))
            else:
                waiting.append(row)
        self._waiting = waiting
        return ready
