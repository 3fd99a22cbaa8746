"""The ``eval`` stage: every model of the comparison on the same held-out episodes, then
``python -m benchmark.compare`` for each question the report asks."""

from __future__ import annotations

import argparse
from pathlib import Path

from baselines.rl.recipes.llm_recipe.common import PROMPT, run_module
from baselines.rl.recipes.llm_recipe.stages import finished_rounds


def evaluate(label: str, team: list[str], args: argparse.Namespace, out: Path) -> Path:
    """Play the held-out suite with one team (``team``: its overrides of ``benchmark.run``)
    into ``eval/<label>``; a run already there goes on from the episodes it has."""
    run_dir = out / "eval" / label
    run_dir.parent.mkdir(exist_ok=True)
    run_module(
        [
            "benchmark.run",
            *team,
            f"workers={args.workers}",
            "reference=false",
            "comm=[true]",
            "logger.console=false",
            f"output_dir={run_dir}",
        ],
        out / "eval" / f"{label}.log",
    )
    return run_dir


def _smollm2(baseline: str, adapter: Path | None, args: argparse.Namespace) -> list[str]:
    """``benchmark.run``'s overrides for the SmolLM2 team with ``adapter`` (None: base)."""
    agents = baseline == "llm_agents"
    return [
        f"baseline={baseline}",
        "llm=smollm2",
        f"llm.adapter={adapter or 'null'}",
        *([f"baseline.kwargs.prompt={PROMPT}", "batch_episodes=6"] if agents else []),
        *([f"+llm.options.dtype={args.eval_dtype}"] if agents else []),
        f"suite={args.suite if agents else 'llm_val'}",
    ]


# What each comparison of the report asks: its runs (the first is the reference) and the
# options of benchmark.compare.
COMPARISONS = (
    ("Each training stage against the base model", ("base", "sft", "dagger", "grpo"), ()),
    ("GRPO against its start (the last DAgger round)", ("dagger", "grpo"), ()),
    ("The trained team against its teacher", ("teacher", "grpo"), ()),
    ("Pretraining: the tiny policy team on the same data", ("tiny", "grpo"), ()),
    (
        "What it learned to say: messages on against off",
        ("grpo", "grpo-comm-off"),
        ("--across-comm",),
    ),
)


def evaluate_all(baseline: str, args: argparse.Namespace, where: Path) -> str:
    """Every model of the comparison on the same held-out episodes, then
    ``python -m benchmark.compare`` over them (``COMPARISONS``, for ``llm_agents``; for
    ``llm_planner`` each stage against the base model): their tables (markdown), also written
    to ``eval/compare.md``. The last trained model and its start are played first, the base
    model (whose episodes run to the step limit) last."""
    stages: dict[str, Path | None] = {"base": None, "sft": where / "sft" / "adapter"}
    rounds = finished_rounds(args, where) if baseline == "llm_agents" else []
    if rounds:
        stages["dagger"] = rounds[-1]
    if (where / "grpo" / "final_adapter").is_dir():
        stages["grpo"] = where / "grpo" / "final_adapter"
    teams = {k: _smollm2(baseline, a, args) for k, a in stages.items() if a is None or a.is_dir()}
    last = list(teams)[-1]
    if baseline == "llm_agents":
        held_out = f"suite={args.suite}"
        tiny_dir = where / "tiny" / "model"
        teams = {
            "teacher": ["baseline=heuristic", "llm=none", held_out],
            **(
                {"tiny": ["baseline=policy", f"baseline.checkpoint={tiny_dir}", held_out]}
                if (where / "tiny" / "sft.json").is_file()
                else {}
            ),
            **dict(reversed(teams.items())),
        }
        if last != "base":
            teams[f"{last}-comm-off"] = [*teams[last], "comm=[false]"]
    runs = {label: evaluate(label, team, args, where) for label, team in teams.items()}
    if baseline == "llm_agents":
        asked = [(t, [n.replace("grpo", last) for n in names], o) for t, names, o in COMPARISONS]
    else:
        asked = [("Each training stage against the base model", list(stages), ())]
    sections = []
    for k, (title, names, options) in enumerate(asked):
        present = [runs[n] for n in dict.fromkeys(names) if n in runs]
        if len(present) < 2:
            continue
        log = where / "eval" / f"compare{k}.log"
        log.unlink(missing_ok=True)
        run_module(
            [
                "benchmark.compare",
                *map(str, present),
                *options,
                "--json",
                str(where / "eval" / f"compare{k}.json"),
            ],
            log,
        )
        sections += [f"### {title}", "", log.read_text().strip(), ""]
    text = "\n".join(sections)
    (where / "eval" / "compare.md").write_text(text)
    return text
