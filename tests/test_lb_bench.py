"""``python -m leaderboard.tools.bench``: its plan of uploads, its verdict on a result, and a small
run under attack against the real server (every attack refused with its status while the
genuine load loses nothing)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from leaderboard.tools.attacks import ATTACKS
from leaderboard.tools.bench import TARGET_P99_S, failures, plan_jobs, run_bench


def test_no_team_uploads_one_bundle_twice() -> None:
    plan = plan_jobs(200)
    assert len(set(plan)) == 200
    kinds = Counter(kind for kind, _ in plan)
    assert kinds[4] == 50  # one in four is the forged copy
    assert sorted(kinds[k] for k in range(4)) == [37, 37, 38, 38]
    assert max(team for _, team in plan) == 49


def _passing() -> dict[str, Any]:
    latency = {"n": 10, "p50_s": 0.05, "p99_s": 0.2, "max_s": 0.3}
    return {
        "submissions": 8,
        "stored": 8,
        "lost": 0,
        "duplicated": [],
        "unexpected_verdicts": [],
        "attacks": {"unexpected": 0, "by_name": {"huge integer": {"statuses": {422: 3}}}},
        "probes": {"failures": 0, "latency": {"/api/tracks": dict(latency), "/": dict(latency)}},
        "rss_mib": {"peak_server": 400.0, "bound": 1200.0},
    }


def test_failures_name_each_broken_promise() -> None:
    assert failures(_passing()) == []
    broken = _passing()
    broken["lost"] = 1
    broken["stored"] = 7
    broken["attacks"]["unexpected"] = 2
    broken["attacks"]["by_name"]["sparse members"] = {"statuses": {}}
    broken["probes"]["failures"] = 1
    broken["probes"]["latency"]["/"]["p99_s"] = TARGET_P99_S + 0.5
    broken["probes"]["latency"]["/api/tracks"] = {"n": 0}
    broken["rss_mib"]["peak_server"] = 1300.0
    assert failures(broken) == [
        "a submission was lost, duplicated or wrongly judged",
        "7 submissions stored of 8 sent",
        "2 attack(s) not refused with their status",
        "attacks never sent: ['sparse members']",
        "1 probe(s) answered with another status than 200",
        "GET /api/tracks was never probed",
        f"GET /: p99 {TARGET_P99_S + 0.5} s > {TARGET_P99_S} s",
        "server RSS peaked at 1300.0 MiB > 1200.0 MiB",
    ]


@pytest.mark.slow
def test_under_attack_nothing_is_lost_and_every_attack_is_refused(tmp_path: Path) -> None:
    result = run_bench(
        submissions=8,
        concurrency=4,
        workers=1,
        log_path=tmp_path / "server.log",
        attackers=2,
        probe_interval_s=0.2,
    )
    assert result["accepted"] == result["stored"] == 8
    assert result["lost"] == 0
    assert result["duplicated"] == []
    assert result["unexpected_verdicts"] == []
    assert result["entries"] == 4
    attacks = result["attacks"]
    assert attacks["unexpected_first"] == []
    for name, (_, status) in ATTACKS.items():
        # Each of the two attackers sends every attack at least once.
        statuses = attacks["by_name"][name]["statuses"]
        assert list(statuses) == [status], name
        assert statuses[status] >= 2, name
    assert attacks["sent"] == sum(
        sum(seen["statuses"].values()) for seen in attacks["by_name"].values()
    )
    probes = result["probes"]
    assert probes["failures_first"] == []
    assert all(latency["n"] > 0 for latency in probes["latency"].values())
    rss = result["rss_mib"]
    assert 0 < rss["idle_server"] <= rss["peak_server"] <= rss["peak_server_and_workers"]
    assert rss["peak_server"] <= rss["bound"]
