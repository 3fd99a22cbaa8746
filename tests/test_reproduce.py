"""``python -m benchmark.reproduce``: a table made from real runs, packed as bundles, rebuilt from
them, and checked cell by cell; every kind of difference is caught and named."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from benchmark.reproduce.app import Options, make_table
from benchmark.reproduce.build import table_records
from benchmark.reproduce.check import committed_problems, fresh_problems
from benchmark.reproduce.sources import read_bundles, read_run_dir
from benchmark.reproduce.spec import SpecError, TableSpec, load_table, parse_table
from benchmark.results.run_dir import RunDirectory
from leaderboard.tools.paper import pack_table
from tests.helpers.lb_bundles import edit

ONE_TASK = "suite.entries=[{task:switch_off_kitchen_v0,split:test,n_agents:[2],seeds:[0]}]"
TABLE = {
    "name": "tiny",
    "title": "Tiny table",
    "caption": "The smoke suite, 2 agents.",
    "runs": [
        {
            "id": "tiny-heuristic",
            "label": "heuristic",
            "deterministic": True,
            "overrides": ["baseline=heuristic", "suite=smoke", "reference=false"],
            "short": [ONE_TASK],
        },
        {
            "id": "tiny-random",
            "label": "random",
            "deterministic": False,
            "overrides": ["baseline=random", "suite=smoke", "reference=false"],
            "short": [ONE_TASK],
        },
    ],
    "rows": ["baseline", "family"],
    "columns": ["SR", "TR", "L", "messages", "specialisation"],
    "figure": {"metric": "TR", "x": "family", "series": "baseline", "kind": "bar"},
}


def _spec(tmp: Path, data: dict | None = None, name: str = "tiny") -> TableSpec:
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data or TABLE))
    return load_table(name, tmp)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny table run fresh, then packed as the committed reference."""
    tmp = tmp_path_factory.mktemp("reproduce")
    spec = _spec(tmp)
    opts = Options(output_dir=str(tmp / "out"), reference_dir=str(tmp / "ref"))
    outcome = make_table(spec, opts)
    (tmp / "ref").mkdir()
    bundles = pack_table(spec, tmp / "out" / "runs", tmp / "ref")
    committed = make_table(
        spec,
        Options(
            source="reference",
            output_dir=str(tmp / "ref" / "tables"),
            reference_dir=str(tmp / "ref"),
        ),
    )
    return {
        "tmp": tmp,
        "spec": spec,
        "outcome": outcome,
        "bundles": bundles,
        "committed": committed,
    }


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_a_fresh_table_has_its_files_and_the_runs_own_numbers(made: dict) -> None:
    out = made["tmp"] / "out"
    assert sorted(p.name for p in made["outcome"].files) == [
        "tiny.csv",
        "tiny.md",
        "tiny.png",
        "tiny.tex",
    ]
    assert (out / "tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = {(r["baseline"], r["family"]): r for r in _csv(out / "tiny.csv")}
    for label, run_id in (("heuristic", "tiny-heuristic"), ("random", "tiny-random")):
        episodes = RunDirectory(out / "runs" / run_id).rows()
        assert len(episodes) == 6 and all(e["status"] == "ok" for e in episodes)
        overall = rows[(label, "all")]
        assert int(overall["episodes"]) == 6
        assert float(overall["TR_mean"]) == pytest.approx(np.mean([e["TR"] for e in episodes]))
        assert float(overall["L_mean"]) == pytest.approx(np.mean([e["L"] for e in episodes]))
        fams = {e["family"] for e in episodes}
        assert {f for (b, f) in rows if b == label} == fams | {"all"}
    md = (out / "tiny.md").read_text()
    assert md.startswith("# Tiny table") and "The smoke suite, 2 agents." in md
    assert "| heuristic | all | 6 | 0 |" in md
    tex = (out / "tiny.tex").read_text()
    assert r"\label{tab:tiny}" in tex and r"\scriptsize [" in tex


def test_the_committed_table_is_what_the_bundles_give(made: dict) -> None:
    tmp, spec = made["tmp"], made["spec"]
    names = sorted(p.name for p in made["bundles"])
    assert names == [
        "tiny-heuristic.smoke-v1.n2.comm-on.partial.skill.tar.gz",
        "tiny-random.smoke-v1.n2.comm-on.partial.skill.tar.gz",
    ]
    assert (tmp / "ref" / "tables" / "tiny.csv").read_text() == (
        tmp / "out" / "tiny.csv"
    ).read_text()
    committed = [read_bundles(r, tmp / "ref") for r in spec.runs]
    assert committed_problems(spec, committed, tmp / "ref" / "tables" / "tiny.csv") == []


def test_a_changed_committed_cell_is_named(made: dict, tmp_path: Path) -> None:
    tmp, spec = made["tmp"], made["spec"]
    text = (tmp / "ref" / "tables" / "tiny.csv").read_text().splitlines()
    head = text[0].split(",")
    at = next(i for i, line in enumerate(text) if line.startswith("heuristic,all,"))
    cells = text[at].split(",")
    cells[head.index("L_mean")] = "1.0"
    text[at] = ",".join(cells)
    edited = tmp_path / "tiny.csv"
    edited.write_text("\n".join(text) + "\n")
    committed = [read_bundles(r, tmp / "ref") for r in spec.runs]
    problems = committed_problems(spec, committed, edited)
    assert len(problems) == 1 and problems[0].startswith("tiny: heuristic/all L_mean: rebuilt ")
    assert problems[0].endswith("committed 1.0")


def test_a_fresh_run_matches_its_committed_reference(made: dict) -> None:
    tmp, spec = made["tmp"], made["spec"]
    fresh = [read_run_dir(r, tmp / "out" / "runs" / r.id) for r in spec.runs]
    committed = [read_bundles(r, tmp / "ref") for r in spec.runs]
    assert fresh_problems(spec, fresh, committed) == []


def _tampered(made: dict, tmp_path: Path, run_id: str, change) -> list:
    """The committed runs with one bundle edited by ``change(rows, traces)``."""
    spec = made["spec"]
    ref = tmp_path / "ref"
    ref.mkdir(parents=True)
    for path in made["bundles"]:
        data = path.read_bytes()
        if path.name.startswith(run_id + "."):
            data = edit(data, change)
        (ref / path.name).write_bytes(data)
    return [read_bundles(r, ref) for r in spec.runs]


def test_a_deterministic_run_whose_trace_changed_is_named(made: dict, tmp_path: Path) -> None:
    spec, tmp = made["spec"], made["tmp"]

    def change(rows, traces):
        rows[0]["trace_hash"] = "0" * 64

    committed = _tampered(made, tmp_path, "tiny-heuristic", change)
    fresh = [read_run_dir(r, tmp / "out" / "runs" / r.id) for r in spec.runs]
    problems = fresh_problems(spec, fresh, committed)
    assert len(problems) == 1
    assert problems[0].startswith("run tiny-heuristic: episode heuristic/")
    assert "differs from the committed 000000000000" in problems[0]


def test_a_deterministic_cell_must_match_exactly(made: dict, tmp_path: Path) -> None:
    spec, tmp = made["spec"], made["tmp"]

    def change(rows, traces):
        for r in rows:
            r["L"] += 1

    committed = _tampered(made, tmp_path, "tiny-heuristic", change)
    fresh = [read_run_dir(r, tmp / "out" / "runs" / r.id) for r in spec.runs]
    problems = fresh_problems(spec, fresh, committed)
    assert problems and all(p.startswith("tiny: heuristic/") for p in problems)
    assert any(p.startswith("tiny: heuristic/all L mean: fresh ") for p in problems)


def test_a_sampled_run_must_land_in_the_committed_interval(made: dict, tmp_path: Path) -> None:
    spec, tmp = made["spec"], made["tmp"]
    fresh = [read_run_dir(r, tmp / "out" / "runs" / r.id) for r in spec.runs]

    def shift(by: float):
        def change(rows, traces):
            for r in rows:
                r["L"] += by

        return change

    # Moved within a sampled run's interval: no difference (random's L interval is wide).
    spread = [r["L"] for r in fresh[1].rows]
    assert np.std(spread) > 1
    within = _tampered(made, tmp_path / "a", "tiny-random", shift(0.1))
    assert fresh_problems(spec, fresh, within) == []
    # Moved far outside it: named, with the interval.
    outside = _tampered(made, tmp_path / "b", "tiny-random", shift(1000))
    problems = fresh_problems(spec, fresh, outside)
    assert problems and all(p.startswith("tiny: random/") for p in problems)
    assert any("L: fresh mean " in p and "outside the committed interval" in p for p in problems)


def test_a_short_run_is_checked_on_its_few_episodes(made: dict) -> None:
    tmp, spec = made["tmp"], made["spec"]
    opts = Options(
        output_dir=str(tmp / "short"), reference_dir=str(tmp / "ref"), short=True, check=True
    )
    outcome = make_table(spec, opts)
    assert outcome.checked and outcome.problems == []
    rows = RunDirectory(tmp / "short" / "runs-short" / "tiny-heuristic").rows()
    assert [r["task"] for r in rows] == ["switch_off_kitchen_v0"]
    # Only the deterministic runs fresh: the sampled one is read from its bundle.
    opts = Options(
        output_dir=str(tmp / "det"),
        reference_dir=str(tmp / "ref"),
        short=True,
        check=True,
        fresh_runs="deterministic",
    )
    outcome = make_table(spec, opts)
    assert outcome.problems == []
    assert not (tmp / "det" / "runs-short" / "tiny-random").exists()
    assert (tmp / "det" / "runs-short" / "tiny-heuristic" / "episodes.jsonl").exists()


def test_a_run_whose_episode_is_not_committed_is_named(made: dict, tmp_path: Path) -> None:
    spec, tmp = made["spec"], made["tmp"]

    def drop(rows, traces):
        del rows[0]

    committed = _tampered(made, tmp_path, "tiny-heuristic", drop)
    fresh = [read_run_dir(r, tmp / "out" / "runs" / r.id) for r in spec.runs]
    problems = fresh_problems(spec, fresh, committed)
    assert any(
        p.startswith("run tiny-heuristic: episode ") and "not in the committed reference" in p
        for p in problems
    )


def test_records_follow_the_table_order_with_all_last(made: dict) -> None:
    tmp, spec = made["tmp"], made["spec"]
    runs = [read_run_dir(r, tmp / "out" / "runs" / r.id) for r in spec.runs]
    records = table_records(spec, runs)
    labels = [r["baseline"] for r in records]
    assert labels == sorted(labels, key=["heuristic", "random"].index)
    assert [r["family"] for r in records if r["baseline"] == "random"][-1] == "all"
    spec_cell = records[0]["specialisation"]
    assert spec_cell["lo"] is None and spec_cell["n"] >= 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, "unknown field(s) ['colour']"),
        ({"rows": ["baseline", "weather"]}, "['weather'] are not row fields"),
        ({"kind": "pie"}, "kind: 'pie' is not one of"),
        ({"name": "other"}, "must equal the file name 'tiny'"),
        ({"runs": []}, "at least one run"),
        ({"figure": {"metric": "SR", "x": "task", "series": "baseline"}}, "'task' is not one of"),
    ],
)
def test_a_malformed_table_file_is_refused_naming_the_field(
    tmp_path: Path, change: dict, message: str
) -> None:
    with pytest.raises(SpecError, match=None) as err:
        _spec(tmp_path, {**TABLE, **change})
    assert message in str(err.value) and "tiny.yaml" in str(err.value)


def test_a_run_may_not_set_what_the_command_sets(tmp_path: Path) -> None:
    run = {**TABLE["runs"][0], "overrides": ["baseline=heuristic", "output_dir=/tmp/x"]}
    with pytest.raises(SpecError, match=r"runs\[0\]\.overrides: 'output_dir=/tmp/x' is set by"):
        parse_table({**TABLE, "runs": [run]}, tmp_path / "tiny.yaml")


def test_every_paper_table_file_parses() -> None:
    from benchmark.reproduce.spec import TABLES_DIR, check_shared_runs, table_names

    names = table_names("all")
    assert "main" in names
    for name in names:
        spec = load_table(name)
        assert spec.runs and spec.columns
    assert {p.stem for p in TABLES_DIR.glob("*.yaml")} == set(names)
    check_shared_runs()


def test_a_run_shared_by_two_tables_must_be_the_same_run(tmp_path: Path) -> None:
    from benchmark.reproduce.spec import check_shared_runs

    _spec(tmp_path)
    other = {**TABLE, "name": "other", "runs": [TABLE["runs"][0]]}
    _spec(tmp_path, other, "other")
    check_shared_runs(tmp_path)  # the same run in two tables: one directory, fine
    changes = [{"overrides": ["baseline=heuristic", "suite=smoke"]}, {"label": "renamed"}]
    for change in changes:
        _spec(tmp_path, {**other, "runs": [{**TABLE["runs"][0], **change}]}, "other")
        with pytest.raises(SpecError, match="run 'tiny-heuristic' is in tables 'other' and 'tiny'"):
            check_shared_runs(tmp_path)


def test_the_command_names_an_unknown_table_and_takes_dash_dash_check(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmark.reproduce",
            "table=nope",
            "--check",
            f"output_dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "no table 'nope'" in done.stderr and "tables are [" in done.stderr


def test_a_shared_runs_bundles_name_the_first_table_holding_it() -> None:
    from leaderboard.tools.paper import _owner

    decomposition = load_table("decomposition")
    assert _owner("main-llm_planner", decomposition) == "main"
    assert _owner("decomposition-free", decomposition) == "decomposition"


def test_figures_order_counts_numerically_and_keep_a_runs_colour() -> None:
    from benchmark.reproduce.render import series_colour, x_order

    # heavy-lift starts at 2 agents, transport at 1: the records' order puts 1 last
    assert x_order(["2", "3", "8", "1", "2"]) == ["1", "2", "3", "8"]
    assert x_order(["1", "2", "all"]) == ["1", "2", "all"]
    rl = load_table("rl")
    labels = [r.label for r in rl.runs]
    # the bar chart (every run) and the learning curves (trainers only) colour GRPO alike
    grpo = f"C{labels.index('GRPO')}"
    assert series_colour(rl, "GRPO", 0) == series_colour(rl, "GRPO", 1) == grpo
    assert series_colour(rl, "not a run", 3) == "C3"


def test_packing_one_run_keeps_the_other_runs_bundles(made: dict, tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    shutil.copytree(made["tmp"] / "ref", ref)
    runs = made["tmp"] / "out" / "runs"
    heuristic = sorted(ref.glob("tiny-heuristic.*.tar.gz"))
    assert heuristic
    for path in heuristic:  # a run not repacked keeps its committed bundle untouched
        os.utime(path, (0, 0))
    for path in ref.glob("tiny-random.*.tar.gz"):
        path.unlink()
    written = pack_table(made["spec"], runs, ref, only=["tiny-random"])
    assert written and all(p.name.startswith("tiny-random.") for p in written)
    assert all(p.stat().st_mtime == 0 for p in heuristic)
    with pytest.raises(ValueError, match=r"table tiny has no run 'nope'; its runs are \["):
        pack_table(made["spec"], runs, ref, only=["nope"])


def test_the_pack_command_names_a_run_no_table_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from leaderboard.tools.paper import main

    assert main(["--table", "main", "--run", "no-such-run", "--out", str(tmp_path)]) == 2
    assert "no run 'no-such-run' in table(s) ['main']" in capsys.readouterr().err


def test_a_filter_keeping_no_episode_of_a_run_is_an_error(made: dict) -> None:
    from dataclasses import replace

    tmp, spec = made["tmp"], made["spec"]
    runs = [read_run_dir(r, tmp / "out" / "runs" / r.id) for r in spec.runs]
    # the tiny runs are comm on: comm true keeps them whole, comm false would drop both rows
    assert table_records(replace(spec, where={"comm": True}), runs) == table_records(spec, runs)
    with pytest.raises(
        ValueError, match=r"keeps no episode of run\(s\) \['tiny-heuristic', 'tiny-random'\]"
    ):
        table_records(replace(spec, where={"comm": False}), runs)
