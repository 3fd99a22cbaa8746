"""Train the embedded SmolLM2 for the LLM baselines on CPU, and report it: LoRA SFT from the
scripted teams, then GRPO from there, then a held-out comparison with the base model.

    python -m baselines.rl.llm_recipe                    # or: make train-llm
    python -m baselines.rl.llm_recipe --only llm_agents --grpo-steps 2 --out outputs/llm_quick

For each baseline (``llm_agents`` learns from the ``heuristic`` team's decisions,
``llm_planner`` from the ``oracle``'s plans), on ``--tasks`` (three families) with training-split
scenes:

1. ``python -m baselines.sft format=<baseline> lora=true ...``: the adapter
   ``smollm2-<short>-sft`` (``<short>``: ``agents`` or ``planner``);
2. ``python -m baselines.train trainer=grpo rollout.team=<baseline> policy.adapter=<sft>``:
   GRPO with LoRA from the SFT adapter (reward sharing alpha 0.7, groups by episode seed), the
   adapter ``smollm2-<short>-grpo``;
3. ``python -m benchmark.run baseline=<baseline> llm=smollm2 suite=llm_val`` with no adapter,
   the SFT adapter and the GRPO adapter: the same held-out val-scene episodes, greedy.

Adapters are written to ``baselines/adapters/<name>`` (what ``llm.adapter=<name>`` loads), the
report (``REPORT.md``: the stages' wall times and the comparison table with exact 95% intervals
on SR) to ``baselines/adapters/`` and ``--out``. Every stage is a public command line whose run
directory is kept under ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from baselines.llm_support import ADAPTERS_DIR

TASKS = ("transport_apple_fridge_v0", "switch_off_bedroom_v0", "search_phone_bedroom_v0")
SHORT = {"llm_agents": "agents", "llm_planner": "planner"}
TEACHER = {"llm_agents": "heuristic", "llm_planner": "oracle"}
STAGES = ("sft", "grpo", "eval")
COLUMNS = ("SR", "TR", "B", "messages", "llm/tokens_in", "llm/tokens_out", "llm/parse_fail_rate")


def _run(args: list[str], log: Path) -> float:
    """Run ``python -m <args>``; its wall time (s). Output goes to ``log``."""
    print("$ python -m", " ".join(args), flush=True)
    start = time.perf_counter()
    with log.open("w") as f:
        command = [sys.executable, "-m", *args]
        subprocess.run(command, check=True, stdout=f, stderr=subprocess.STDOUT)
    return round(time.perf_counter() - start, 1)


def _tasks(tasks: list[str]) -> str:
    return "[" + ",".join(tasks) + "]"


def sft(baseline: str, args: argparse.Namespace, out: Path) -> float:
    name = f"smollm2-{SHORT[baseline]}-sft"
    episodes = args.sft_episodes if baseline == "llm_agents" else args.plan_episodes
    return _run(
        [
            "baselines.sft",
            f"format={baseline}",
            f"teacher={TEACHER[baseline]}",
            "init=smollm2",
            "lora=true",
            f"tasks={_tasks(args.tasks)}",
            f"episodes={episodes}",
            "successful_only=true",
            f"max_demos={args.max_demos}",
            f"epochs={args.sft_epochs}",
            "batch_size=4",
            "lr=3e-4",
            "name=null",
            f"adapter={name}",
            f"hydra.run.dir={out / 'sft'}",
        ],
        out / "sft.log",
    )


def grpo(baseline: str, args: argparse.Namespace, out: Path) -> float:
    short = SHORT[baseline]
    return _run(
        [
            "baselines.train",
            "trainer=grpo",
            "policy=smollm2_lora",
            f"policy.adapter=smollm2-{short}-sft",
            f"policy.adapter_out=smollm2-{short}-grpo",
            f"rollout.team={baseline}",
            "rollout.reward_sharing=0.7",
            "rollout.temperature=1.0",
            f"data.tasks={_tasks(args.tasks)}",
            f"data.seeds_per_step={args.seeds_per_step}",
            f"data.group_size={args.group_size}",
            f"steps={args.grpo_steps}",
            "eval.every=0",
            "eval.episodes=0",
            "trainer.lr=1e-4",
            "trainer.minibatch_size=8",
            f"trainer.max_samples={args.max_samples}",
            "logger=console",
            "threads=2",
            f"workers={args.workers}",
            f"hydra.run.dir={out / 'grpo'}",
        ],
        out / "grpo.log",
    )


def evaluate(baseline: str, adapter: str | None, args: argparse.Namespace, out: Path) -> dict:
    """Run the held-out suite; the ``all`` row of its summary (mean and interval per metric)."""
    run_dir = out / f"eval-{adapter or 'base'}"
    seconds = _run(
        [
            "benchmark.run",
            f"baseline={baseline}",
            "llm=smollm2",
            f"llm.adapter={adapter or 'null'}",
            f"suite={args.suite}",
            f"workers={args.workers}",
            "reference=false",
            "comm=[true]",
            "logger.console=false",
            f"output_dir={run_dir}",
        ],
        out / f"eval-{adapter or 'base'}.log",
    )
    with (run_dir / "summary.csv").open() as f:
        row: dict[str, Any] = next(r for r in csv.DictReader(f) if r["family"] == "all")
    episodes = [json.loads(line) for line in (run_dir / "episodes.jsonl").open()]
    for name in COLUMNS:
        values = [e[name] for e in episodes if e.get(name) is not None]
        if f"{name}_mean" not in row and values:
            row[f"{name}_mean"] = sum(values) / len(values)
    return {"adapter": adapter or "base", "seconds": seconds, **row}


def same_weights(a: str, b: str) -> bool:
    """Whether the committed adapters ``a`` and ``b`` hold the same tensors."""
    from safetensors.torch import load_file

    x = load_file(str(ADAPTERS_DIR / a / "adapter_model.safetensors"))
    y = load_file(str(ADAPTERS_DIR / b / "adapter_model.safetensors"))
    return x.keys() == y.keys() and all(bool((x[k] == y[k]).all()) for k in x)


def stage_facts(where: Path) -> dict[str, Any]:
    """What the run directories of ``where`` say of the training stages: wall times, SFT's
    demonstrations and loss, GRPO's steps, updates and returns."""
    facts: dict[str, Any] = {}
    sft_file = where / "sft" / "sft.json"
    if sft_file.is_file():
        sft = json.loads(sft_file.read_text())
        facts["SFT s"] = sft["seconds"]
        facts["SFT demonstrations"] = sft["demonstrations_used"]
        facts["SFT loss"] = round(sft["epoch_losses"][-1], 3)
    metrics = where / "grpo" / "metrics.jsonl"
    if metrics.is_file():
        steps = [json.loads(line) for line in metrics.open()]
        train = [m for m in steps if m["kind"] == "train"]
        if train:
            facts["GRPO s"] = round(train[-1]["wall_s"], 1)
            facts["GRPO steps"] = len(train)
            facts["GRPO samples trained"] = sum(int(m.get("charts/samples", 0)) for m in train)
            facts["GRPO rollout SR"] = round(sum(m["task/SR"] for m in train) / len(train), 3)
            facts["GRPO return mean"] = round(
                sum(m["charts/return_mean"] for m in train) / len(train), 3
            )
    return facts


def _cell(row: dict[str, Any], name: str) -> str:
    mean = row.get(f"{name}_mean")
    if mean in (None, ""):
        return "-"
    if name == "SR":
        return f"{float(mean):.2f} [{float(row['SR_lo']):.2f}, {float(row['SR_hi']):.2f}]"
    return f"{float(mean):.3g}"


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "# SmolLM2-135M adapters for the LLM baselines",
        "",
        f"Trained on {', '.join(args.tasks)} (train-split scenes); evaluated on suite "
        f"`{args.suite}` (val-split scenes, greedy, constrained), 2 agents, comm on.",
        "SR: mean [exact 95% Clopper-Pearson interval]; other columns: episode means.",
        "Reproduce: `make train-llm` (`python -m baselines.rl.llm_recipe`, every stage; "
        f"this invocation: `{' '.join(sys.argv[1:]) or 'defaults'}`).",
        "",
    ]
    for baseline, res in results.items():
        lines += [f"## {baseline}", ""]
        lines += [f"- {k}: {v}" for k, v in res["facts"].items()]
        lines += [f"- eval {r['adapter']}: {r['seconds']} s" for r in res["rows"]]
        lines += [f"- {note}" for note in res.get("notes", [])]
        if not res["rows"]:
            lines += ["", "Not evaluated yet.", ""]
            continue
        lines += ["", "| model | episodes | " + " | ".join(COLUMNS) + " |"]
        lines.append("|" + "---|" * (len(COLUMNS) + 2))
        for row in res["rows"]:
            cells = " | ".join(_cell(row, c) for c in COLUMNS)
            lines.append(f"| {row['adapter']} | {row['episodes']} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def evaluate_all(
    baseline: str, args: argparse.Namespace, where: Path
) -> tuple[list[dict[str, Any]], list[str]]:
    """The held-out rows of the base model and of both adapters, and notes on them."""
    short = SHORT[baseline]
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for adapter in (None, f"smollm2-{short}-sft", f"smollm2-{short}-grpo"):
        if adapter and adapter.endswith("-grpo") and same_weights(rows[-1]["adapter"], adapter):
            # No group of rollouts differed in return, so GRPO never updated: the same weights
            # decode the same greedy episodes, no need to play them again.
            notes.append(f"{adapter} holds the SFT adapter's weights (GRPO made no update)")
            rows.append({**rows[-1], "adapter": adapter, "seconds": 0.0})
            continue
        rows.append(evaluate(baseline, adapter, args, where))
    return rows, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/llm_recipe"))
    parser.add_argument("--only", nargs="+", default=list(SHORT), choices=list(SHORT))
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--sft-episodes", type=int, default=60, help="heuristic episodes")
    parser.add_argument("--plan-episodes", type=int, default=40, help="oracle episodes")
    parser.add_argument("--max-demos", type=int, default=160, help="SFT demonstrations used")
    parser.add_argument("--sft-epochs", type=int, default=1)
    parser.add_argument("--grpo-steps", type=int, default=2)
    parser.add_argument("--seeds-per-step", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-samples", type=int, default=48, help="GRPO samples per update")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--suite", default="llm_val")
    parser.add_argument(
        "--stages", nargs="+", default=list(STAGES), choices=list(STAGES), help="what to run"
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    # The record of every stage so far (committed beside the adapters), merged into as stages run.
    saved = ADAPTERS_DIR / "results.json"
    results: dict[str, dict[str, Any]] = json.loads(saved.read_text()) if saved.is_file() else {}
    for baseline in args.only:
        where = out / baseline
        where.mkdir(parents=True, exist_ok=True)
        if "sft" in args.stages:
            sft(baseline, args, where)
        if "grpo" in args.stages:
            grpo(baseline, args, where)
        entry = results.setdefault(baseline, {"facts": {}, "rows": [], "notes": []})
        entry["facts"] = {**entry["facts"], **stage_facts(where)}
        if "eval" in args.stages:
            entry["rows"], entry["notes"] = evaluate_all(baseline, args, where)
        saved.write_text(json.dumps(results, indent=1, default=str) + "\n")
        text = report(results, args)
        for folder in (out, ADAPTERS_DIR):
            (folder / "REPORT.md").write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
