"""Ranking: the Wilson interval against hand-computed values, the tie rule (rank = 1 + entries
whose lower bound is above this entry's upper bound) on hand-worked cases, entry summaries and
the track table."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from leaderboard.db.models import Entry, Submission, Team
from leaderboard.ranking import entry_summary, ranks, track_table, wilson

# Wilson score interval, z = 1.959964 (z^2 = 3.841459):
#   centre = (p + z^2/2n) / (1 + z^2/n),  half = z sqrt(p(1-p)/n + z^2/4n^2) / (1 + z^2/n)
# 5/10: centre = (0.5 + 0.192073) / 1.384146 = 0.5;
#       half = 1.959964 * sqrt(0.025 + 0.009604) / 1.384146 = 0.263407 -> (0.236593, 0.763407)
# 0/10: centre = 0.192073 / 1.384146 = 0.138766;
#       half = 1.959964 * sqrt(0.009604) / 1.384146 = 0.138766          -> (0, 0.277533)
# 1/1:  centre = (1 + 1.920730) / 4.841459 = 0.603275;
#       half = 1.959964 * sqrt(0.960365) / 4.841459 = 0.396725          -> (0.206549, 1)
# 3/4:  centre = (0.75 + 0.480182) / 1.960365 = 0.627527;
#       half = 1.959964 * sqrt(0.046875 + 0.060023) / 1.960365 = 0.326885
#                                                                       -> (0.300642, 0.954413)
HAND = [
    ((5, 10), (0.236593, 0.763407)),
    ((0, 10), (0.0, 0.277533)),
    ((10, 10), (0.722467, 1.0)),
    ((1, 1), (0.206549, 1.0)),
    ((3, 4), (0.300642, 0.954413)),
    ((0, 0), (0.0, 1.0)),
]


@pytest.mark.parametrize(("counts", "expected"), HAND)
def test_wilson_matches_hand_computed_intervals(counts, expected) -> None:
    lo, hi = wilson(*counts)
    assert lo == pytest.approx(expected[0], abs=2e-6)
    assert hi == pytest.approx(expected[1], abs=2e-6)


def test_wilson_is_symmetric_and_refuses_impossible_counts() -> None:
    for n in (1, 7, 30):
        for k in range(n + 1):
            lo, hi = wilson(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0
            assert (lo, hi) == pytest.approx((1 - wilson(n - k, n)[1], 1 - wilson(n - k, n)[0]))
    for bad in [(-1, 3), (4, 3)]:
        with pytest.raises(ValueError, match="must be in"):
            wilson(*bad)


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


def test_an_entry_summary_gives_wilson_for_sr_and_t_intervals_with_references() -> None:
    rows = [
        _row("transport", 0, 1.0, 10),
        _row("transport", 1, 0.0, 30),
        _row("switch", 0, 1.0, 20),
        _row("transport", 0, 1.0, 20, n=1),  # the reference of transport seed 0: L_1 = 20
    ]
    summary = entry_summary(rows)
    assert summary["episodes"] == 3
    assert summary["intervals"]["SR"].startswith("Wilson")
    every, transport = summary["families"]["all"], summary["families"]["transport"]
    assert set(summary["families"]) == {"all", "transport", "switch"}
    assert every["SR"] == pytest.approx(
        {"mean": 2 / 3, "lo": wilson(2, 3)[0], "hi": wilson(2, 3)[1], "n": 3, "successes": 2}
    )
    # TR of transport: values 1 and 0, mean 0.5, s = 0.707107, half = 12.706205 * 0.5 = 6.35,
    # clipped to the range [0, 1].
    assert transport["TR"] == {"mean": 0.5, "lo": 0.0, "hi": 1.0, "n": 2}
    # L of all: 10, 30, 20: mean 20, s = 10, half = 4.302653 * 10 / sqrt(3) = 24.841377.
    assert every["L"]["mean"] == 20.0
    assert every["L"]["lo"] == 0.0  # clipped: L is a non-negative count
    assert every["L"]["hi"] == pytest.approx(20 + 4.302653 * 10 / math.sqrt(3), abs=1e-5)
    # only transport seed 0 has a reference: speedup = 20 / 10, EI = 1 - 10 / 20.
    assert every["speedup"] == {"mean": 2.0, "lo": 2.0, "hi": 2.0, "n": 1}
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
    lo, hi = wilson(successes, n)
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
        _entry(1, "low", 2, 30),  # (0.018, 0.213)
        _entry(2, "mid", 15, 30),  # (0.332, 0.668)
        _entry(3, "top", 29, 30),  # (0.833, 0.994)
        _entry(4, "top-too", 28, 30),  # (0.787, 0.982): overlaps top
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
