"""A table's training stage (benchmark/reproduce/training.py): its spec, when it runs, and the
learning curves read from the training runs' logs. The rl table's own short training is in
tests/test_paper_rl.py (slow)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from benchmark.metrics.stats import clopper_pearson
from benchmark.reproduce.sources import SourceError
from benchmark.reproduce.spec import SpecError, parse_table
from benchmark.reproduce.training import (
    curve_cell,
    curves_path,
    load_curves,
    read_curves,
    run_training,
    save_curves,
    write_curves,
)

TRAINING = {
    "module": "baselines.rl.recipes.recipe",
    "args": ["--out", "{out}", "--minutes", "1"],
    "done": "final_eval.json",
    "curves": {"GRPO": "grpo", "PPO": "ppo"},
}
TABLE = {
    "name": "trained",
    "title": "Trained",
    "caption": "Two trainers.",
    "training": TRAINING,
    "runs": [
        {"id": "t-grpo", "label": "GRPO", "deterministic": False, "from": "final_eval/grpo"},
        {"id": "t-ppo", "label": "PPO", "deterministic": False, "from": "final_eval/ppo"},
    ],
    "rows": ["baseline", "task"],
    "columns": ["SR", "B"],
}


def _parse(tmp: Path, data: dict):
    return parse_table(data, tmp / "trained.yaml")


def test_a_trained_table_reads_its_runs_inside_the_training(tmp_path: Path) -> None:
    spec = _parse(tmp_path, TABLE)
    assert spec.training is not None and spec.training.curves == (("GRPO", "grpo"), ("PPO", "ppo"))
    run = spec.run("t-ppo")
    assert run.source == "final_eval/ppo" and run.overrides == ()
    assert spec.run_dir(tmp_path, run) == tmp_path / "training" / "final_eval" / "ppo"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"training": None}, "reads 'from' a training, but the table has none"),
        ({"training": {**TRAINING, "args": ["--minutes", "1"]}}, "'{out}'"),
        ({"training": {**TRAINING, "curves": {}}}, "training.curves"),
        ({"training": {**TRAINING, "when": "now"}}, "unknown field(s) ['when']"),
        ({"runs": [{**TABLE["runs"][0], "from": "../elsewhere"}]}, "inside the training"),
        ({"training": {**TRAINING, "out": "/tmp/elsewhere"}}, "training.out: '/tmp/elsewhere'"),
        ({"training": {**TRAINING, "curves": {"GRPO": "../grpo"}}}, "training.curves.GRPO"),
        (
            {"runs": [{**TABLE["runs"][0], "overrides": ["baseline=random"]}]},
            "no overrides or short",
        ),
    ],
)
def test_a_malformed_training_is_refused_naming_the_field(
    tmp_path: Path, change: dict, message: str
) -> None:
    with pytest.raises(SpecError) as err:
        _parse(tmp_path, {**TABLE, **change})
    assert message in str(err.value) and "trained.yaml" in str(err.value)


def test_a_finished_training_is_not_run_again(tmp_path: Path) -> None:
    spec = _parse(tmp_path, {**TABLE, "training": {**TRAINING, "module": "no.such.module"}})
    assert spec.training is not None
    (tmp_path / "final_eval.json").write_text("[]")
    run_training(spec.training, tmp_path, short=False)  # the missing module is never started
    (tmp_path / "final_eval.json").unlink()
    with pytest.raises(SourceError, match=r"training failed \(exit 1\).*no\.such\.module"):
        run_training(spec.training, tmp_path, short=False)


def test_a_training_that_leaves_no_done_file_fails(tmp_path: Path) -> None:
    spec = _parse(tmp_path, {**TABLE, "training": {**TRAINING, "module": "this"}})
    assert spec.training is not None
    with pytest.raises(SourceError, match=r"without writing .*final_eval\.json"):
        run_training(spec.training, tmp_path, short=False)


def _log(run: Path, evals: list[tuple[int, float, int]]) -> None:
    run.mkdir(parents=True)
    rows = [{"kind": "train", "step": 1, "wall_s": 3.0, "task/SR": 1.0}]
    rows += [
        {"kind": "eval", "step": s, "wall_s": 60.0 * s, "eval/task/SR": sr, "eval/episodes": n}
        for s, sr, n in evals
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_curves_are_the_logged_evaluations_with_exact_intervals(tmp_path: Path) -> None:
    spec = _parse(tmp_path, TABLE)
    assert spec.training is not None
    _log(tmp_path / "grpo", [(0, 0.25, 8), (15, 0.75, 8)])
    _log(tmp_path / "ppo", [(0, 0.25, 8)])
    curves = read_curves(spec.training, tmp_path)
    assert [(c["series"], c["step"]) for c in curves] == [("GRPO", 0), ("GRPO", 15), ("PPO", 0)]
    cell = curve_cell(curves[1])
    assert cell["mean"] == 0.75 and (cell["lo"], cell["hi"]) == pytest.approx(clopper_pearson(6, 8))
    committed = save_curves(curves, curves_path(spec, tmp_path))
    assert committed.name == "trained.curves.jsonl" and load_curves(committed) == curves
    files = write_curves(tmp_path / "out", spec, curves)
    assert [f.name for f in files] == ["trained.curves.csv", "trained.curves.png"]
    with files[0].open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["series"], r["step"], r["episodes"]) for r in rows] == [
        ("GRPO", "0", "8"),
        ("GRPO", "15", "8"),
        ("PPO", "0", "8"),
    ]
    assert float(rows[1]["minutes"]) == 15.0 and float(rows[1]["SR_lo"]) == pytest.approx(
        clopper_pearson(6, 8)[0]
    )


def test_a_curve_log_without_episode_counts_is_refused_naming_the_line(tmp_path: Path) -> None:
    spec = _parse(tmp_path, TABLE)
    assert spec.training is not None
    _log(tmp_path / "grpo", [(0, 0.5, 4)])
    _log(tmp_path / "ppo", [(0, 0.5, 4)])
    path = tmp_path / "ppo" / "metrics.jsonl"
    path.write_text(path.read_text().replace(', "eval/episodes": 4', ""))
    with pytest.raises(SourceError, match=r"ppo/metrics.jsonl:2: evaluation row without"):
        read_curves(spec.training, tmp_path)
    (tmp_path / "grpo" / "metrics.jsonl").unlink()
    with pytest.raises(SourceError, match=r"curve 'GRPO': no .*grpo/metrics\.jsonl"):
        read_curves(spec.training, tmp_path)
