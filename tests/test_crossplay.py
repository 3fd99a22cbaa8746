"""Cross-play in the runner (``partners=<population>``): the focal team on agent_0 with each
held-out partner on the other agents, beside its self-play on the same episodes, and the ad-hoc
teamwork gap computed from the paired rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from rich.console import Console

from benchmark.metrics.stats import mcnemar_exact
from benchmark.paths import CONFIGS_DIR
from benchmark.results.crossplay import crossplay_table, parse_population
from benchmark.runner.app import build_jobs, run
from benchmark.runner.config import register_configs

ENTRY = (
    "suite.entries=[{task: transport_apple_fridge_v0, split: test, n_agents: [2], "
    "seeds: [0, 1, 2]}]"
)


def _cfg(out: Path, *overrides: str):
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return compose(
            "run", overrides=[f"output_dir={out}", "logger.console=false", "workers=0", *overrides]
        )


def test_each_partner_plays_every_multi_agent_episode_beside_self_play(tmp_path: Path) -> None:
    jobs = build_jobs(_cfg(tmp_path, "baseline=heuristic", "partners=smoke", ENTRY))
    by_kind: dict[str, list] = {}
    for job in jobs:
        by_kind.setdefault("reference" if job.reference else job.partner or "self", []).append(job)
    assert {k: len(v) for k, v in by_kind.items()} == {
        "self": 3,
        "heuristic": 3,
        "random": 3,
        "reference": 3,
    }
    cross = by_kind["random"][0]
    assert cross.team == "mixed" and cross.baseline == "heuristic+random"
    focal, partner = cross.team_kwargs["members"]
    assert focal == {"agents": [0], "baseline": "heuristic", "kwargs": {}, "label": "heuristic"}
    assert partner == {"label": "random", "baseline": "random"}
    assert len({j.key for j in jobs}) == len(jobs)


def test_a_crossplay_run_reports_the_gap_from_its_paired_rows(tmp_path: Path) -> None:
    result = run(
        _cfg(tmp_path, "baseline=heuristic", "partners=smoke", ENTRY, "reference=false"),
        Console(quiet=True),
    )
    rows = result["rows"]
    cross = [r for r in rows if r.get("partner") == "random"]
    assert len(cross) == 3 and all(r["status"] == "ok" for r in cross)
    assert all(r["members"] == {"agent_0": "heuristic", "agent_1": "random"} for r in cross)
    record = next(r for r in result["crossplay"] if r["partner"] == "random")
    selfplay = {r["seed"]: r for r in rows if "partner" not in r}
    pairs = [(selfplay[r["seed"]], r) for r in cross]
    only_self = sum(a["SR"] == 1 and b["SR"] == 0 for a, b in pairs)
    only_cross = sum(a["SR"] == 0 and b["SR"] == 1 for a, b in pairs)
    assert record["episodes"] == 3 and record["unpaired"] == 0
    assert record["SR_gap"] == pytest.approx(
        sum(a["SR"] for a, _ in pairs) / 3 - sum(b["SR"] for _, b in pairs) / 3
    )
    assert record["mcnemar_p"] == mcnemar_exact(only_self, only_cross)
    assert record["TR_gap"] == pytest.approx(sum(a["TR"] - b["TR"] for a, b in pairs) / 3)
    text = (tmp_path / "crossplay.md").read_text()
    assert "| random | on | 2 | 3 |" in text and "| heuristic | on | 2 | 3 |" in text
    # the summary keeps each pairing apart
    baselines = {r["baseline"] for r in result["table"]}
    assert baselines == {"heuristic", "heuristic+heuristic", "heuristic+random"}


def test_episodes_without_a_selfplay_twin_are_counted_not_paired() -> None:
    base = {
        "task": "t",
        "split": "test",
        "n_agents": 2,
        "comm": True,
        "status": "ok",
        "reference": False,
        "TR": 0.5,
    }
    rows = [
        {**base, "seed": 0, "SR": 1},
        {**base, "seed": 0, "SR": 0, "partner": "p", "TR": 0.0},
        {**base, "seed": 1, "SR": 0, "partner": "p"},
    ]
    (record,) = crossplay_table(rows)
    assert (record["episodes"], record["unpaired"], record["SR_gap"]) == (1, 1, 1.0)
    assert record["TR_gap"] == 0.5 and record["only_self"] == 1


@pytest.mark.parametrize(
    ("population", "says"),
    [
        ({"members": [{"label": "a", "baseline": "random"}]}, "needs a 'name'"),
        ({"name": "x", "members": []}, "non-empty list"),
        ({"name": "x", "members": [{"baseline": "random"}]}, "'label' must be"),
        ({"name": "x", "members": [{"label": "a/b", "baseline": "random"}]}, "'label' must be"),
        ({"name": "x", "members": [{"label": "a", "baseline": "random"}] * 2}, "is taken"),
        (
            {"name": "x", "members": [{"label": "a", "baseline": "random", "agents": [1]}]},
            "no 'agents'",
        ),
    ],
)
def test_a_population_that_cannot_be_played_is_refused_naming_why(population, says) -> None:
    with pytest.raises(ValueError, match=says):
        parse_population(population)


def test_swap_plays_each_pairing_with_the_seats_exchanged_and_reports_the_drop(
    tmp_path: Path,
) -> None:
    result = run(
        _cfg(
            tmp_path, "baseline=heuristic", "partners=smoke", "swap=true", ENTRY, "reference=false"
        ),
        Console(quiet=True),
    )
    rows = result["rows"]
    swapped = [r for r in rows if r.get("partner") == "random@swapped"]
    seated = {r["seed"]: r for r in rows if r.get("partner") == "random"}
    assert len(swapped) == 3
    assert all(r["members"] == {"agent_0": "random", "agent_1": "heuristic"} for r in swapped)
    record = next(r for r in result["crossplay"] if r["partner"] == "random")
    pairs = [(seated[r["seed"]], r) for r in swapped]
    assert record["swap_episodes"] == 3
    assert record["swap_drop"] == pytest.approx(sum(a["SR"] - b["SR"] for a, b in pairs) / 3)

    # The focal seat is agent_0 seated and agent_1 swapped: its credit share is the share of
    # the atoms credited to that agent (the row's per-agent credit).
    def share(row: dict, seat: int) -> float | None:
        total = sum(row["credited"])
        return row["credited"][seat] / total if total else None

    for side, picked, seat in (("cross", list(seated.values()), 0),):
        got = [share(r, seat) for r in picked if share(r, seat) is not None]
        assert record[f"focal_credit_share_{side}"] == pytest.approx(sum(got) / len(got))
    swapped_record = next(r for r in result["crossplay"] if r["partner"] == "random@swapped")
    got = [share(r, 1) for r in swapped if share(r, 1) is not None]
    assert swapped_record["focal_credit_share_cross"] == pytest.approx(sum(got) / len(got))
    text = (tmp_path / "crossplay.md").read_text()
    assert "Policy-swap drop" in text and "The focal seat" in text
    members = (tmp_path / "members.md").read_text()
    assert "| heuristic+random@swapped | on | 2 | random | 1 | 3 |" in members
