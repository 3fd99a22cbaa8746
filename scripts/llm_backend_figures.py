"""Decisions/s, parse failures and fallbacks of LLM backends on the smoke suite, cut short.

``prepare`` writes the smoke suite's tasks with at most ``--decisions`` decisions per agent, and a
suite ``smoke_short`` that plays them, under ``--out``; ``report`` reads run directories and
prints one line per run. The README's LLM backends section gives the commands:

    python scripts/llm_backend_figures.py prepare --out outputs/figures --decisions 10
    python -m benchmark.run baseline=llm_agents llm=smollm2 suite=smoke_short reference=false \\
        workers=0 batch_episodes=6 hydra.searchpath=[file://outputs/figures] \\
        output_dir=outputs/figures/smollm2
    python scripts/llm_backend_figures.py report outputs/figures/smollm2 ...

A run's decisions are the sum of its episodes' ``L_decisions``; its decisions/s divide them by
the longest episode's ``wall_s`` (with ``batch_episodes`` all episodes are played at once, so
that is the time of the whole play, model loading excluded); parse failures and fallbacks are
the per-episode rates times the episode's decisions, summed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from benchmark.paths import CONFIGS_DIR, TASKS_DIR


def prepare(out: Path, decisions: int) -> Path:
    """Write the short tasks and ``<out>/suite/smoke_short.yaml``; return the suite file."""
    smoke = yaml.safe_load((CONFIGS_DIR / "suite" / "smoke.yaml").read_text())
    tasks = out / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    entries = []
    for entry in smoke["entries"]:
        source = next(TASKS_DIR.rglob(f"{entry['task']}.yaml"), None)
        if source is None:
            raise SystemExit(f"smoke task {entry['task']!r} has no file under {TASKS_DIR}")
        spec = yaml.safe_load(source.read_text())
        head, _, version = spec["id"].rpartition("_v")
        spec["id"] = f"{head}_d{decisions}_v{version}"  # ids end in _v<version>
        spec["limits"] = {**spec["limits"], "decisions": decisions}
        path = tasks / f"{spec['id']}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        entries.append({**entry, "task": str(path.resolve())})
    suite = out / "suite" / "smoke_short.yaml"
    suite.parent.mkdir(parents=True, exist_ok=True)
    body = {"name": f"smoke_d{decisions}", "version": "v1", "entries": entries}
    suite.write_text(
        f"# The smoke suite's tasks cut to {decisions} decisions per agent.\n"
        + yaml.safe_dump(body, sort_keys=False)
    )
    return suite


def figures(run_dir: Path) -> dict[str, Any]:
    """The figures of one run directory (see the module docstring)."""
    path = run_dir / "episodes.jsonl"
    if not path.is_file():
        raise SystemExit(f"{run_dir} has no episodes.jsonl (did the run finish?)")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    errors = [r for r in rows if r.get("status") != "ok"]
    ok = [r for r in rows if r.get("status") == "ok"]
    decisions = sum(int(r["L_decisions"]) for r in ok)
    wall = max((float(r["wall_s"]) for r in ok), default=0.0)
    return {
        "run": str(run_dir),
        "episodes": len(ok),
        "errors": len(errors),
        "decisions": decisions,
        "play_s": round(wall, 1),
        "decisions_per_s": round(decisions / wall, 2) if wall else None,
        "parse_failures": round(
            sum(r.get("llm/parse_fail_rate", 0.0) * r["L_decisions"] for r in ok)
        ),
        "fallbacks": round(sum(r.get("llm/fallback_rate", 0.0) * r["L_decisions"] for r in ok)),
        "truncated": round(sum(r.get("llm/truncated_rate", 0.0) * r["L_decisions"] for r in ok)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="write the short tasks and the smoke_short suite")
    p.add_argument("--out", type=Path, default=Path("outputs/figures"))
    p.add_argument("--decisions", type=int, default=10)
    r = sub.add_parser("report", help="print the figures of run directories")
    r.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        if args.decisions < 1:
            raise SystemExit(f"--decisions={args.decisions} must be at least 1")
        print(prepare(args.out, args.decisions))
    else:
        for run in args.runs:
            print(json.dumps(figures(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
