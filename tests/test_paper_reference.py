"""The committed paper tables hold: every committed trace replays to its recorded metrics, every
committed table is exactly what its committed bundles give, and a short fresh run of each table's
deterministic runs matches the committed episodes trace by trace.

A change to the simulator, the tasks, the teams or the metrics that moves a published number
fails here, with the table, row and column (or the episode) named."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from benchmark.reproduce.app import Options, committed_runs, make_table
from benchmark.reproduce.build import table_records
from benchmark.reproduce.check import committed_problems
from benchmark.reproduce.sources import bundle_paths
from benchmark.reproduce.spec import load_table, table_names
from benchmark.reproduce.training import curves_path, load_curves, write_curves
from leaderboard.core.bundle import read_bundle
from leaderboard.core.verify import verify_bundle
from leaderboard.tools.seed import PAPER_DIR

TABLES = PAPER_DIR / "tables"
COMMITTED = sorted(p.stem for p in TABLES.glob("*.csv") if "." not in p.stem)  # the tables
CURVES = [n for n in COMMITTED if load_table(n).training is not None]  # with learning curves
BUNDLES = sorted(PAPER_DIR.glob("*.tar.gz"))
# The tables whose runs are committed (README, "Reproducing the tables"); the others are
# documented commands whose results are not committed yet.
EXPECTED = ["comm", "crossplay", "decomposition", "llm", "main", "mapthor", "rl", "scaling"]


def test_the_committed_tables_are_the_expected_ones() -> None:
    assert COMMITTED == EXPECTED
    for name in COMMITTED:
        figure = ("png",) if load_table(name).figure is not None else ()
        curves = ("curves.csv", "curves.png") if name in CURVES else ()
        for ext in ("md", "tex", *figure, *curves):
            assert (TABLES / f"{name}.{ext}").is_file(), f"{name}.{ext} is not committed"
    stray = (
        {p.name for p in TABLES.glob("*.csv")}
        - {f"{n}.csv" for n in COMMITTED}
        - {f"{n}.curves.csv" for n in CURVES}
    )
    assert not stray, f"CSVs of no committed table: {sorted(stray)}"


@pytest.mark.parametrize("name", CURVES)
def test_committed_learning_curves_are_exactly_their_committed_evaluations(
    name: str, tmp_path: Path
) -> None:
    """The curves table is rebuilt from ``<table>.curves.jsonl`` (the training runs' held-out
    evaluations, committed), and every training run named by the table has its start."""
    spec = load_table(name)
    curves = load_curves(curves_path(spec, PAPER_DIR))
    write_curves(tmp_path, spec, curves)
    fresh = (tmp_path / f"{name}.curves.csv").read_text()
    assert fresh == (TABLES / f"{name}.curves.csv").read_text()
    assert spec.training is not None
    for label, _ in spec.training.curves:
        steps = [c["step"] for c in curves if c["series"] == label]
        assert steps and steps[0] == 0 and steps == sorted(set(steps)), (label, steps)


def test_every_committed_bundle_belongs_to_a_table_run() -> None:
    runs = {r.id for name in table_names("all") for r in load_table(name).runs}
    owners = {p.name.split(".", 1)[0] for p in BUNDLES}
    assert owners <= runs, f"bundles of no table run: {sorted(owners - runs)}"
    for name in COMMITTED:
        for run in load_table(name).runs:
            assert bundle_paths(run, PAPER_DIR), f"{name}: run {run.id} has no committed bundle"


def test_the_committed_bundles_stay_lean() -> None:
    total = sum(p.stat().st_size for p in PAPER_DIR.rglob("*") if p.is_file())
    assert total < 50 * 2**20, f"leaderboard/data/paper holds {total / 2**20:.1f} MiB"


@pytest.mark.parametrize("name", COMMITTED)
def test_a_committed_table_is_rebuilt_exactly_from_its_bundles(name: str) -> None:
    spec = load_table(name)
    problems = committed_problems(spec, committed_runs(spec, PAPER_DIR), TABLES / f"{name}.csv")
    assert problems == [], "\n".join(problems)


def test_a_comm_table_filter_keeping_no_episode_of_a_run_is_an_error() -> None:
    from dataclasses import replace

    spec = load_table("comm")
    runs = committed_runs(spec, PAPER_DIR)
    llm_runs = r"\['comm-llm_agents', 'comm-llm_agents_v4'\]"
    with pytest.raises(ValueError, match=r"keeps no episode of run\(s\) " + llm_runs):
        table_records(replace(spec, where={"baseline": "heuristic"}), runs)


# The crossplay table's partner runs are 33 bundles (3,400 episodes): make test replays those of
# the random partner (and every self-play run), the slow test the others.
CROSSPLAY_CI_PARTNERS = ("random",)


def _in_ci(path: Path) -> bool:
    run = path.name.split(".", 1)[0]
    return "--" not in run or run.split("--", 1)[1] in CROSSPLAY_CI_PARTNERS


@pytest.mark.parametrize(
    "path", [p for p in BUNDLES if _in_ci(p)], ids=lambda p: p.name.split(".")[0]
)
def test_every_committed_trace_replays(path: Path) -> None:
    _check_replays(path)


@pytest.mark.slow
@pytest.mark.parametrize(
    "path", [p for p in BUNDLES if not _in_ci(p)], ids=lambda p: p.name.split(".")[0]
)
def test_every_other_crossplay_trace_replays(path: Path) -> None:
    _check_replays(path)


def _check_replays(path: Path) -> None:
    with path.open("rb") as handle:
        verdict = verify_bundle(read_bundle(handle))
    reasons = list(verdict.reasons) + [r for e in verdict.episodes for r in e.reasons]
    assert verdict.ok, "\n".join(reasons[:20])
    assert verdict.episodes


# The tables with a deterministic run; a table of sampled runs only (decomposition) has its
# short fresh runs in tests/test_paper_reference_llm.py.
DETERMINISTIC = [n for n in COMMITTED if any(r.deterministic for r in load_table(n).runs)]


# The crossplay table has a deterministic run per focal team and partner (about 10 s each, a
# process start mostly): make test plays the self-play runs and the random partner's afresh,
# the slow test below all of them.


def _fresh_spec(name: str, every_partner: bool):
    spec = load_table(name)
    if spec.kind != "crossplay" or every_partner:
        return spec
    from dataclasses import replace

    runs = tuple(r for r in spec.runs if not r.partner or r.partner in CROSSPLAY_CI_PARTNERS)
    return replace(spec, runs=runs)


def _check_short_fresh_run(name: str, tmp_path: Path, every_partner: bool) -> None:
    spec = _fresh_spec(name, every_partner)
    opts = Options(
        table=name,
        output_dir=str(tmp_path),
        short=True,
        check=True,
        fresh_runs="deterministic",
        reference_dir=str(PAPER_DIR),
    )
    outcome = make_table(spec, opts)
    assert outcome.problems == [], "\n".join(outcome.problems)
    assert any((tmp_path / "runs-short").iterdir())


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_a_short_fresh_run_matches_the_committed_episodes(name: str, tmp_path: Path) -> None:
    """The deterministic runs of the table on a few seeds (each run's ``short`` overrides),
    checked trace by trace; the sampled (LLM) runs are read from their bundles, their short runs
    being minutes each on 2 cores (tests/test_paper_reference_llm.py, marked slow)."""
    _check_short_fresh_run(name, tmp_path, every_partner=False)


@pytest.mark.slow
def test_every_crossplay_partner_run_matches_afresh(tmp_path: Path) -> None:
    _check_short_fresh_run("crossplay", tmp_path, every_partner=True)


def test_the_changelog_names_the_committed_tables_as_they_are() -> None:
    """Every change to a committed table comes with a new versioned CHANGELOG entry: the newest
    ``## Tables vN (date)`` entry lists the sha256 (first 12 hex digits) of each table's CSV
    (and of each learning-curves CSV, as ``<table>.curves``)."""
    text = (PAPER_DIR.parents[2] / "CHANGELOG.md").read_text()
    entries = re.findall(r"^## Tables v(\d+) \((\d{4}-\d{2}-\d{2})\)$", text, re.M)
    assert entries, "CHANGELOG.md has no '## Tables vN (YYYY-MM-DD)' entry"
    versions = [int(v) for v, _ in entries]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    newest = text.split(f"## Tables v{versions[0]} ", 1)[1].split("\n## ", 1)[0]
    listed = dict(re.findall(r"^- `([\w.]+)`: ([0-9a-f]{12})$", newest, re.M))
    names = [*COMMITTED, *(f"{n}.curves" for n in CURVES)]
    actual = {
        name: hashlib.sha256((TABLES / f"{name}.csv").read_bytes()).hexdigest()[:12]
        for name in names
    }
    if listed != actual:
        lines = "\n".join(f"- `{n}`: {h}" for n, h in sorted(actual.items()))
        raise AssertionError(
            f"the committed tables changed since Tables v{versions[0]}: add an entry "
            f"'## Tables v{versions[0] + 1} (date)' saying what changed and why, listing\n{lines}"
        )
