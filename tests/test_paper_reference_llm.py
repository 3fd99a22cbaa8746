"""The sampled (LLM) runs of the committed tables, freshly played on their short episode sets
with the embedded model and checked against the committed intervals. Minutes per run on 2
cores, so marked slow: ``pytest -m slow tests/test_paper_reference_llm.py``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.reproduce.app import committed_runs
from benchmark.reproduce.check import fresh_problems
from benchmark.reproduce.sources import fresh_run
from benchmark.reproduce.spec import load_table
from leaderboard.tools.seed import PAPER_DIR

TABLES = sorted(p.stem for p in (PAPER_DIR / "tables").glob("*.csv") if "." not in p.stem)
SAMPLED = [
    (name, r.id)
    for name in TABLES
    for r in load_table(name).runs
    if not r.deterministic and not r.source  # trained policies: tests/test_paper_rl.py
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "run_id"), SAMPLED)
def test_a_short_fresh_llm_run_lands_in_the_committed_intervals(
    name: str, run_id: str, tmp_path: Path
) -> None:
    spec = load_table(name)
    run = spec.run(run_id)
    fresh = fresh_run(run, tmp_path / run_id, workers=0, short=True)
    committed = [c for c in committed_runs(spec, PAPER_DIR) if c.spec.id == run_id]
    problems = fresh_problems(replace(spec, runs=(run,)), [fresh], committed)
    assert problems == [], "\n".join(problems)
    assert fresh.rows and all(r["status"] == "ok" for r in fresh.rows)
