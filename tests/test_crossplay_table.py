"""The crossplay paper table (configs/paper/crossplay.yaml, benchmark/reproduce/crossplay.py):
each focal run becomes its self-play run and one run per held-out partner, written as Hydra
overrides the runner reads back exactly, and the committed table pairs the partner runs'
episodes with the self-play ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from benchmark.reproduce.app import committed_runs
from benchmark.reproduce.crossplay import expand_runs, hydra_value
from benchmark.reproduce.spec import SpecError, load_table, parse_table
from benchmark.results.crossplay import load_population
from leaderboard.tools.seed import PAPER_DIR


@pytest.mark.parametrize(
    "value",
    [
        [{"agents": [0], "baseline": "heuristic", "label": "SmolLM2 SFT + DAgger"}],
        {"kwargs": {"checkpoint": "baselines/adapters/policy-tiny-families", "slow": 2}},
        {"a": None, "b": True, "c": 0.5, "d": "true", "e": "1", "f": "null"},
    ],
)
def test_values_are_written_as_overrides_hydra_reads_back_exactly(value) -> None:
    parsed = OverridesParser.create().parse_override(f"key={hydra_value(value)}")
    assert parsed.value() == value


def test_a_focal_run_becomes_self_play_and_one_run_per_partner() -> None:
    labels = [p["label"] for p in load_population("heldout")["members"]]
    runs = expand_runs(
        [
            {
                "id": "xp-h",
                "label": "heuristic",
                "focal": {"baseline": "heuristic"},
                "deterministic": True,
                "overrides": ["suite=smoke"],
            }
        ],
        "heldout",
        ["policy-tiny"],
        "t",
    )
    assert [r["id"] for r in runs] == ["xp-h", *(f"xp-h--{label}" for label in labels)]
    assert [r.get("partner") for r in runs] == [None, *labels]
    determ = {r["id"]: r["deterministic"] for r in runs}
    assert determ["xp-h--policy-tiny"] is False and determ["xp-h--random"] is True
    silent = next(r for r in runs if r.get("partner") == "heuristic-silent")
    (members,) = [o for o in silent["overrides"] if o.startswith("baseline.kwargs.members=")]
    value = OverridesParser.create().parse_override(members).value()
    assert value == [
        {"baseline": "heuristic", "label": "heuristic", "agents": [0]},
        {"label": "heuristic-silent", "baseline": "heuristic", "kwargs": {"silent": True}},
    ]
    assert silent["overrides"][0] == "baseline=mixed" and silent["overrides"][-1] == "suite=smoke"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sampled": ["nobody"]}, "not partners of heldout"),
        ({"population": "nowhere"}, "unknown partner population 'nowhere'"),
        (
            {
                "runs": [
                    {
                        "id": "x",
                        "label": "x",
                        "focal": {"baseline": "heuristic", "agents": [0]},
                        "deterministic": True,
                        "overrides": [],
                    }
                ]
            },
            "without 'agents'",
        ),
        (
            {
                "runs": [
                    {
                        "id": "x",
                        "label": "x",
                        "focal": {"baseline": "heuristic"},
                        "deterministic": True,
                        "overrides": ["baseline=oracle"],
                    }
                ]
            },
            "from 'focal'",
        ),
        ({"columns": ["SR"]}, "not crossplay columns"),
    ],
)
def test_a_malformed_crossplay_table_is_refused_naming_the_field(change, message, tmp_path):
    path = Path(__file__).parents[1] / "configs" / "paper" / "crossplay.yaml"
    data = {**yaml.safe_load(path.read_text()), **change}
    with pytest.raises(SpecError, match=message):
        parse_table(data, tmp_path / "crossplay.yaml")


def test_the_committed_table_is_the_paired_gap_of_its_bundles() -> None:
    spec = load_table("crossplay")
    runs = {r.spec.id: r for r in committed_runs(spec, PAPER_DIR)}
    selfplay = {r["key"].split("/", 1)[1]: r for r in runs["xp-heuristic"].rows}
    cross = runs["xp-heuristic--random"].rows
    pairs = [(selfplay[r["key"].split("/", 1)[1]], r) for r in cross]
    assert len(pairs) == len(cross) == 104
    gap = sum(a["SR"] - b["SR"] for a, b in pairs) / len(pairs)
    csv = (PAPER_DIR / "tables" / "crossplay.csv").read_text().splitlines()
    header = csv[0].split(",")
    row = next(line.split(",") for line in csv if line.startswith("heuristic,random,"))
    assert float(row[header.index("SR@gap_mean")]) == pytest.approx(gap)
    assert int(row[header.index("episodes")]) == 104
