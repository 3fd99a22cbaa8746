"""The rl table's short reproduction end to end: the recipe's SFT, one update of each trainer,
the held-out evaluations through the runner, the table and its learning curves. A few minutes
on 2 cores, so marked slow: ``pytest -m slow tests/test_paper_rl.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.reproduce.app import Options, make_table
from benchmark.reproduce.spec import load_table
from benchmark.results.run_dir import RunDirectory


@pytest.mark.slow
def test_the_rl_table_trains_evaluates_and_plots_its_trainers(tmp_path: Path) -> None:
    spec = load_table("rl")
    assert spec.training is not None
    made = make_table(spec, Options(table="rl", output_dir=str(tmp_path), short=True))
    names = sorted(p.name for p in made.files)
    assert names == ["rl.csv", "rl.curves.csv", "rl.curves.png", "rl.md", "rl.png", "rl.tex"]
    training = tmp_path / "runs-short" / "training"
    final = json.loads((training / "final_eval.json").read_text())
    assert len(final) == len(spec.runs)  # the SFT start and every trainer
    for label, run in spec.training.curves:
        rows = [json.loads(x) for x in (training / run / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows if r["kind"] == "train"] == [1], label  # one update
        evals = [r for r in rows if r["kind"] == "eval"]
        assert [r["step"] for r in evals] == [0, 1] and all(r["eval/episodes"] == 2 for r in evals)
    for run in spec.runs:
        rows = RunDirectory(spec.run_dir(tmp_path / "runs-short", run)).rows()
        assert sorted(r["task"] for r in rows) == [
            "transport_apple_fridge_v0",
            "transport_produce_fridge_v0",
        ]
        assert all(r["status"] == "ok" for r in rows)
    table = (tmp_path / "short" / "rl.md").read_text()
    assert "| SPPO (per decision) | transport_produce_fridge_v0 | 1 | 0 |" in table
