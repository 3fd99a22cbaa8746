"""Ranking: each metric's interval is the one its declaration names (SR: Clopper-Pearson against
closed forms and published values, and equal to the run summaries' for the same rows), a
Student-t cell of one value has no bounds, the tie rule (rank = 1 + entries whose lower bound is
above this entry's upper bound) on hand-worked cases, entry summaries and the track table."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from helpers.lb_board import verified

from benchmark.metrics.specs import metric
from benchmark.metrics.stats import clopper_pearson
from benchmark.results.summary import summarize
from leaderboard.core.ranking import (
    EPISODE_METRICS,
    INTERVALS,
    all_tied,
    entry_summary,
    interval_caption,
    metric_cell,
    ranks,
    sr_interval,
    track_table,
)
from leaderboard.server.db.models import Entry, Submission, Team

# Clopper-Pearson 95%: at 0 of n successes the interval is [0, 1 - 0.025^(1/n)], at n of n
# [0.025^(1/n), 1]; 5/10 and 3/4 are the exact binomial limits of the published tables.
HAND = [
    ((0, 10), (0.0, 1 - 0.025 ** (1 / 10))),  # (0, 0.308497)
    ((10, 10), (0.025 ** (1 / 10), 1.0)),
    ((0, 6), (0.0, 1 - 0.025 ** (1 / 6))),  # (0, 0.459270)
    ((1, 1), (0.025, 1.0)),
    ((5, 10), (0.187086, 0.812914)),
    ((3, 4), (0.194120, 0.993690)),
    ((0, 0), (0.0, 1.0)),
]


@pytest.mark.parametrize(("counts", "expected"), HAND)
def test_sr_takes_the_clopper_pearson_interval_of_hand_computed_values(counts, expected) -> None:
    lo, hi = sr_interval(*counts)
    assert lo == pytest.approx(expected[0], abs=2e-6)
    assert hi == pytest.approx(expected[1], abs=2e-6)


def test_sr_interval_refuses_impossible_counts() -> None:
    for bad in [(-1, 3), (4, 3)]:
        with pytest.raises(ValueError, match="must be in"):
            sr_interval(*bad)


def test_each_metric_takes_the_interval_its_declaration_names() -> None:
    assert INTERVALS["SR"] == "Clopper-Pearson 95%" == INTERVALS[metric("SR").name]
    assert set(INTERVALS) == set(EPISODE_METRICS)
    for name in EPISODE_METRICS:
        expected = (
            "Clopper-Pearson 95%" if metric(name).interval == "clopper_pearson" else "Student-t 95%"
        )
        assert INTERVALS[name] == expected, name
    assert (
        interval_caption(INTERVALS) == "SR: Clopper-Pearson 95%; every other metric: Student-t 95%"
    )
    assert interval_caption({"TR": "Student-t 95%"}) == "every metric: Student-t 95%"


def test_the_board_and_the_run_summaries_give_the_same_intervals_for_the_same_bundle() -> None:
    bundle, verdict, summary = verified("heuristic")
    recomputed = {e.key: e.metrics for e in verdict.episodes}
    rows = [{**row, **recomputed[row["key"]]} for row in bundle.rows]
    run = next(r for r in summarize(rows) if r["family"] == "all")
    board = summary["families"]["all"]
    assert board["SR"]["successes"] == 4 and board["SR"]["n"] == 6
    assert (board["SR"]["lo"], board["SR"]["hi"]) == pytest.approx(clopper_pearson(4, 6))
    for name in EPISODE_METRICS:
        for part in ("mean", "lo", "hi", "n"):
            assert board[name][part] == pytest.approx(run[name][part]), (name, part)


def test_a_student_t_cell_of_one_value_keeps_its_mean_and_n_but_has_no_bounds() -> None:
    assert metric_cell("L", [47]) == {"mean": 47.0, "lo": None, "hi": None, "n": 1}
    assert metric_cell("L", [None, 47, None]) == {"mean": 47.0, "lo": None, "hi": None, "n": 1}
    two = metric_cell("L", [40, 60])
    assert two["n"] == 2 and two["lo"] == 0.0 and two["hi"] > 60  # clipped below at 0
    assert metric_cell("L", []) == {"mean": None, "lo": None, "hi": None, "n": 0}
    # One episode is a valid binomial trial: SR keeps its exact interval.
    assert metric_cell("SR", [1.0]) == pytest.approx(
        {"mean": 1.0, "lo": 0.025, "hi": 1.0, "n": 1, "successes": 1}
    )


@pytest.mark.parametrize(
    ("intervals", "expected"),
    [
        ([], []),
        ([(0.2, 0.4)], [1]),
        # disjoint: each is below all the better ones
        ([(0.8, 0.9), (0.5, 0.6), (0.1, 0.2)], [1, 2, 3]),
        # all overlap: one shared rank
        ([(0.5, 0.9), (0.4, 0.8), (0.6, 0.7)], [1, 1, 1]),
        # a chain of overlaps: A~B, B~C, C~D, but A is above C and D, and B above D
        ([(0.6, 0.9), (0.5, 0.7), (0.3, 0.55), (0.1, 0.4)], [1, 1, 2, 3]),
        # the order of the input does not matter
        ([(0.1, 0.4), (0.3, 0.55), (0.6, 0.9), (0.5, 0.7)], [3, 2, 1, 1]),
        # touching bounds are not "above": they share
        ([(0.5, 0.9), (0.2, 0.5)], [1, 1]),
        # identical intervals share, and both count against a clearly worse entry
        ([(0.6, 0.8), (0.6, 0.8), (0.1, 0.3)], [1, 1, 3]),
    ],
)
def test_ranks_count_the_entries_significantly_above(intervals, expected) -> None:
    assert ranks(intervals) == expected


def _row(family: str, seed: int, sr: float, L: int, n: int = 2, **extra) -> dict:
    return {
        "key": f"b/{family}/{seed}/n{n}",
        "status": "ok",
        "baseline": "b",
        "task": f"{family}_task_v0",
        "family": family,
        "scene": "FloorPlan1",
        "seed": seed,
        "comm": True,
        "n_agents": n,
        "reference": n == 1,
        "SR": sr,
        "TR": sr,
        "L": L,
        **extra,
    }


def test_an_entry_summary_gives_clopper_pearson_for_sr_and_t_intervals_with_references() -> None:
    rows = [
        _row("transport", 0, 1.0, 10),
        _row("transport", 1, 0.0, 30),
        _row("switch", 0, 1.0, 20),
        _row("transport", 0, 1.0, 20, n=1),  # the reference of transport seed 0: L_1 = 20
    ]
    summary = entry_summary(rows)
    assert summary["episodes"] == 3
    assert summary["intervals"] == INTERVALS
    every, transport = summary["families"]["all"], summary["families"]["transport"]
    assert set(summary["families"]) == {"all", "transport", "switch"}
    lo, hi = clopper_pearson(2, 3)
    assert every["SR"] == pytest.approx({"mean": 2 / 3, "lo": lo, "hi": hi, "n": 3, "successes": 2})
    # TR of transport: values 1 and 0, mean 0.5, s = 0.707107, half = 12.706205 * 0.5 = 6.35,
    # clipped to the range [0, 1].
    assert transport["TR"] == {"mean": 0.5, "lo": 0.0, "hi": 1.0, "n": 2}
    # L of all: 10, 30, 20: mean 20, s = 10, half = 4.302653 * 10 / sqrt(3) = 24.841377.
    assert every["L"]["mean"] == 20.0
    assert every["L"]["lo"] == 0.0  # clipped: L is a non-negative count
    assert every["L"]["hi"] == pytest.approx(20 + 4.302653 * 10 / math.sqrt(3), abs=1e-5)
    # only transport seed 0 has a reference: speedup = 20 / 10, EI = 1 - 10 / 20; one value
    # has no interval.
    assert every["speedup"] == {"mean": 2.0, "lo": None, "hi": None, "n": 1}
    # switch holds one episode: its L keeps its mean and n, with no [20, 20].
    assert summary["families"]["switch"]["L"] == {"mean": 20.0, "lo": None, "hi": None, "n": 1}
    assert every["EI"]["mean"] == 0.5 and every["parallel_efficiency"]["mean"] == 1.0
    assert summary["families"]["switch"]["speedup"]["mean"] is None
    assert every["specialisation"] is None


def test_run_level_metrics_come_from_each_familys_traces() -> None:
    rows = [_row("transport", 0, 1.0, 10), _row("switch", 0, 1.0, 10)]

    def trace(kinds: tuple[str, str]) -> dict:
        return {
            "skills": [
                {"agent": f"agent_{i}", "skill": kind, "accepted": True}
                for i, kind in enumerate(kinds)
            ]
        }

    traces = {rows[0]["key"]: trace(("pickup", "toggle_on")), rows[1]["key"]: trace(("put", "put"))}
    families = entry_summary(rows, traces)["families"]
    assert families["transport"]["specialisation"] == 1.0
    assert families["switch"]["specialisation"] == 0.0


def _entry(eid: int, team: str, successes: int, n: int, track: str = "smoke-v1.x") -> Entry:
    lo, hi = sr_interval(successes, n)
    sr = {"mean": successes / n, "lo": lo, "hi": hi, "n": n, "successes": successes}
    return Entry(
        id=eid,
        submission_id=100 + eid,
        team_id=eid,
        track=track,
        summary={"families": {"all": {"SR": sr, "TR": {"mean": 0.5}}}},
        created_at=datetime(2030, 1, 1, tzinfo=UTC) + timedelta(hours=eid),
        team=Team(id=eid, name=team),
        submission=Submission(method=f"m{eid}", model="", llm_tokens=eid, wall_time_s=1.5),
    )


def test_a_track_table_ranks_its_entries_with_shared_ranks() -> None:
    entries = [
        _entry(1, "low", 2, 30),  # (0.008, 0.221)
        _entry(2, "mid", 15, 30),  # (0.313, 0.687)
        _entry(3, "top", 29, 30),  # (0.828, 0.999)
        _entry(4, "top-too", 28, 30),  # (0.779, 0.992): overlaps top
    ]
    table = track_table(entries, attempts={3: 2, 4: 1})
    assert [(r.team, r.rank) for r in table] == [("top", 1), ("top-too", 1), ("mid", 3),
                                                 ("low", 4)]  # fmt: skip
    assert table[0].sr["successes"] == 29 and table[0].metrics["TR"] == {"mean": 0.5}
    assert [(r.method, r.submission_id, r.attempts) for r in table[:2]] == [
        ("m3", 103, 2),
        ("m4", 104, 1),
    ]
    assert table[-1].attempts == 0 and table[-1].llm_tokens == 1
    equal = track_table([_entry(2, "later", 15, 30), _entry(1, "earlier", 15, 30)])
    assert [r.team for r in equal] == ["earlier", "later"]


def test_a_track_table_never_mixes_tracks() -> None:
    with pytest.raises(
        ValueError, match=r"one track; got entries of \['smoke-v1.x', 'smoke-v2.x'\]"
    ):
        track_table([_entry(1, "a", 1, 2), _entry(2, "b", 1, 2, track="smoke-v2.x")])


def test_a_table_is_all_tied_when_two_or_more_entries_all_share_rank_one() -> None:
    # The smoke suite: 4 of 6 beside 0 of 6 overlap ([0.22, 0.96] and [0, 0.46]).
    smoke = track_table([_entry(1, "a", 4, 6), _entry(2, "b", 0, 6), _entry(3, "c", 0, 6)])
    assert [r.rank for r in smoke] == [1, 1, 1] and all_tied(smoke)
    separated = track_table([_entry(1, "a", 29, 30), _entry(2, "b", 2, 30)])
    assert [r.rank for r in separated] == [1, 2] and not all_tied(separated)
    partly = track_table([_entry(1, "a", 29, 30), _entry(2, "b", 28, 30), _entry(3, "c", 2, 30)])
    assert [r.rank for r in partly] == [1, 1, 3] and not all_tied(partly)
    assert not all_tied(track_table([_entry(1, "alone", 0, 6)])), "one entry is not a tie"
