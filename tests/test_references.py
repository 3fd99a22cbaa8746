"""Rows meet their one-agent references: in the summary at once, for the loggers as they come."""

from __future__ import annotations

from itertools import permutations

import pytest

from benchmark.results.references import ReferenceJoin, with_reference


def row(
    n: int, seed: int, ticks: int, sr: float = 1.0, reference: bool = False, status: str = "ok"
) -> dict:
    return {
        "key": f"b/t/n{n}/s{seed}/{'ref' if reference else 'run'}",
        "baseline": "b",
        "task": "t",
        "scene": "FloorPlan1",
        "seed": seed,
        "comm": True,
        "n_agents": n,
        "reference": reference,
        "status": status,
        "SR": sr,
        "L": ticks,
    }


def released(join: ReferenceJoin, rows: list[dict]) -> list[list[dict]]:
    """What the join releases after each row, then at the flush."""
    return [join.add(r) for r in rows] + [join.flush()]


def test_a_row_waits_for_its_reference_and_gets_speedup_when_it_comes() -> None:
    team, ref = row(2, 0, 20), row(1, 0, 30, reference=True)
    out = released(ReferenceJoin([], [], one_agent_jobs=1), [team, ref])
    assert out[0] == [] and out[2] == []
    (logged,) = out[1]
    assert logged["key"] == team["key"] and logged["speedup"] == 1.5
    assert logged["parallel_efficiency"] == 0.75 and logged["EI"] == pytest.approx(1 / 3)


def test_a_row_whose_reference_came_first_is_released_at_once() -> None:
    out = released(
        ReferenceJoin([], [], one_agent_jobs=1), [row(1, 0, 30, reference=True), row(2, 0, 20)]
    )
    assert out[0] == [] and [r["speedup"] for r in out[1]] == [1.5] and out[2] == []


def test_a_failed_reference_releases_the_row_without_reference_metrics() -> None:
    team = row(2, 0, 20)
    other = row(2, 1, 25)
    out = released(
        ReferenceJoin([], [], one_agent_jobs=2),
        [team, row(1, 0, 300, sr=0.0, reference=True), other, row(1, 1, 50, reference=True)],
    )
    assert out[:3] == [[], [], []]  # a one-agent episode is still to come
    assert {r["key"]: r["speedup"] for r in out[3]} == {team["key"]: None, other["key"]: 2.0}


def test_without_one_agent_episodes_to_come_rows_are_released_at_once() -> None:
    out = released(ReferenceJoin([], [], one_agent_jobs=0), [row(2, 0, 20)])
    assert [r["speedup"] for r in out[0]] == [None] and out[1] == []


def test_previous_runs_and_resumed_rows_serve_as_references_but_are_not_released() -> None:
    previous = [row(1, 0, 40, reference=True)]
    resumed = [row(1, 1, 50, reference=True), row(2, 2, 10)]
    out = released(
        ReferenceJoin(resumed, previous, one_agent_jobs=0), [row(2, 0, 20), row(2, 1, 25)]
    )
    assert [r["speedup"] for r in out[0]] == [2.0] and [r["speedup"] for r in out[1]] == [2.0]
    assert out[2] == []


def test_a_previous_runs_reference_wins_over_the_runs_own_one_agent_episode() -> None:
    own = row(1, 0, 10)
    out = released(ReferenceJoin([], [row(1, 0, 40)], one_agent_jobs=1), [own, row(2, 0, 20)])
    assert [r["speedup"] for r in out[0]] == [4.0]  # the one-agent run row, against L_1 = 40
    assert [r["speedup"] for r in out[1]] == [2.0]
    assert with_reference([own, row(2, 0, 20)], [row(1, 0, 40)])[1]["speedup"] == 2.0


def test_errors_and_reference_jobs_are_never_released() -> None:
    crashed = {**row(2, 0, 0), "status": "error"}
    out = released(
        ReferenceJoin([], [], one_agent_jobs=1), [crashed, row(1, 0, 30, reference=True)]
    )
    assert out == [[], [], []]


def test_more_one_agent_episodes_than_announced_is_an_error() -> None:
    join = ReferenceJoin([], [], one_agent_jobs=0)
    with pytest.raises(ValueError, match="more one-agent episodes"):
        join.add(row(1, 0, 30, reference=True))
    with pytest.raises(ValueError, match="one_agent_jobs"):
        ReferenceJoin([], [], one_agent_jobs=-1)


def test_in_any_order_every_result_is_released_once_as_the_summary_joins_it() -> None:
    rows = [
        row(2, 0, 20),
        row(3, 0, 15),
        row(1, 0, 30, reference=True),
        row(2, 1, 25),
        row(1, 1, 300, sr=0.0, reference=True),
        {**row(2, 2, 0), "status": "error"},
    ]
    expected = sorted(with_reference(rows), key=lambda r: r["key"])
    assert [r["speedup"] for r in expected] == [1.5, None, 2.0]
    for order in permutations(rows):
        out = [r for batch in released(ReferenceJoin([], [], 2), list(order)) for r in batch]
        assert sorted(out, key=lambda r: r["key"]) == expected, [r["key"] for r in order]
