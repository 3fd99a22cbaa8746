"""benchmark.results is the one home of what the runner, the paper tables and the board share:
the episodes of a suite (the runner plays exactly the list the board expects) and each
metric's interval (the board and the committed tables give a bundle the same SR interval)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from benchmark.paths import CONFIGS_DIR, REPO_ROOT
from benchmark.results.suite import load_suite, parse_suite, suite_episodes, suites
from benchmark.runner.app import build_jobs
from benchmark.runner.config import register_configs
from leaderboard.core.bundle import read_bundle
from leaderboard.core.ranking import entry_summary
from leaderboard.core.tracks import Track, expected_episodes

PAPER = REPO_ROOT / "leaderboard" / "data" / "paper"
register_configs()


def _jobs(tmp_path: Path, suite: str, comm: str) -> list[str]:
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        cfg = compose(
            "run",
            overrides=[f"output_dir={tmp_path}", f"suite={suite}", "baseline=heuristic", comm],
        )
    return [job.key for job in build_jobs(cfg)]


@pytest.mark.parametrize(
    "name", [name for name, suite in sorted(suites().items()) if not suite.hidden]
)
def test_the_runner_plays_exactly_the_episodes_the_board_expects(tmp_path: Path, name: str) -> None:
    """Run episodes: the same list. References: the board expects one per cell of each track
    (optional in a bundle); the runner plays it unless the entry runs one agent itself, whose
    run episode then serves as the reference."""
    suite = load_suite(name)
    for comm in (True, False):
        played = _jobs(tmp_path, name, f"comm=[{str(comm).lower()}]")
        assert len(played) == len(set(played))
        expected = [
            ep
            for n in sorted({n for e in suite.entries for n in e.n_agents})
            for ep in expected_episodes(
                Track(name, suite.version, n, comm, "partial", "skill"), challenge=None
            )
        ]
        runs = sorted(ep.key("heuristic") for ep in expected if not ep.reference)
        assert sorted(k for k in played if k.endswith("/run")) == runs, name
        for ep in {ep for ep in expected if ep.reference}:
            served = ep.key("heuristic").replace("/ref", "/run")
            assert ep.key("heuristic") in played or served in played, ep
        assert {k for k in played if k.endswith("/ref")} <= {
            ep.key("heuristic") for ep in expected if ep.reference
        }


def test_a_suite_parses_the_same_for_the_runner_and_the_board() -> None:
    import yaml

    path = CONFIGS_DIR / "suite" / "paper.yaml"
    assert parse_suite(yaml.safe_load(path.read_text()), str(path)) == load_suite("paper")
    with pytest.raises(ValueError, match=r"entries\[0\]\.seeds': expected a list of integers"):
        parse_suite(
            {"name": "x", "version": "v1", "entries": [{"task": "t", "seeds": ["a"]}]}, "x.yaml"
        )
    with pytest.raises(ValueError, match="file path"):
        parse_suite(
            {"name": "x", "version": "v1", "entries": [{"task": "mine/t.yaml"}]},
            "x.yaml",
            registered_only=True,
        )


def test_references_are_listed_once_and_only_for_cells_without_a_one_agent_team() -> None:
    suite = parse_suite(
        {
            "name": "x",
            "version": "v1",
            "entries": [
                {"task": "a", "n_agents": [2, 3], "seeds": [0, 1]},
                {"task": "b", "n_agents": [1, 2], "seeds": [0]},
            ],
        },
        "x",
    )
    eps = suite_episodes(suite)
    refs = [e for e in eps if e.reference]
    assert [(e.task, e.seed) for e in refs] == [("a", 0), ("a", 1)]
    assert [(e.task, e.n_agents, e.reference) for e in eps[:3]] == [
        ("a", 2, False),
        ("a", 3, False),
        ("a", 1, True),
    ]
    assert [e.n_agents for e in suite_episodes(suite, n_agents=3)] == [3, 1, 3, 1]


@pytest.mark.parametrize(
    ("table", "run_id", "label"),
    [
        ("main", "main-heuristic", "heuristic"),
        ("main", "main-oracle", "oracle"),
        ("llm", "llm-dagger", "SmolLM2 SFT + DAgger"),
        ("llm", "llm-teacher", "heuristic (teacher)"),
    ],
)
def test_the_board_and_the_tables_give_a_committed_bundle_the_same_sr_interval(
    table: str, run_id: str, label: str
) -> None:
    (path,) = sorted(PAPER.glob(f"{run_id}.*.tar.gz"))
    with path.open("rb") as stream:
        bundle = read_bundle(stream)
    board = entry_summary(bundle.rows)["families"]
    rows = {
        r["family"]: r
        for r in csv.DictReader((PAPER / "tables" / f"{table}.csv").open())
        if r["baseline"] == label
    }
    assert set(rows) == set(board), (sorted(rows), sorted(board))
    for family, row in rows.items():
        cell = board[family]["SR"]
        assert int(row["episodes"]) == cell["n"]
        assert float(row["SR_mean"]) == pytest.approx(cell["mean"], abs=1e-9)
        assert float(row["SR_lo"]) == pytest.approx(cell["lo"], abs=1e-9)
        assert float(row["SR_hi"]) == pytest.approx(cell["hi"], abs=1e-9)
