"""Held-out evaluation of saved policies through the runner, with exact intervals on SR.

    python -m baselines.rl.recipes.evaluate sft-tiny outputs/rl_recipe/grpo/final_model \
        --episodes 200
    python -m baselines.rl.recipes.evaluate RUN/final_model --config RUN/config.yaml \
        --out outputs/eval
    python -m baselines.rl.recipes.evaluate smollm2 --adapter path/to/lora_adapter --suite smoke

Each policy is the ``policy`` team (:mod:`baselines.rl.core.policy_team`) in an ordinary
``python -m benchmark.run`` run, one run directory per policy under ``--out``: rows, traces and
``summary.md`` as for any baseline, resumed when re-run. The episodes are the held-out ones of a
training config (``--config``, else the defaults): ``data.tasks`` in turn with
``data.n_agents`` agents on ``eval.split`` scenes, seeds from ``eval.seed_start``, sampled at
``eval.temperature`` with the run's prompt format (``rollout.*``); or a runner suite
(``--suite``). Every policy plays the same episodes, each with its own seeded sampling, so the
numbers are reproducible. SR comes with its Clopper-Pearson 95% interval, the other metrics
with the runner's t intervals.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from baselines.rl.core.config import TrainConfig
from baselines.rl.core.policy import resolve_model_dir
from baselines.rl.core.policy_team import check_adapter
from benchmark.paths import CONFIGS_DIR
from benchmark.results.summary import RUN_METRICS, SUMMARY_METRICS
from benchmark.runner.app import run
from benchmark.runner.config import register_configs


def training_config(path: str | Path | None = None) -> DictConfig:
    """The training config whose ``data``, ``eval`` and ``rollout`` settings define the
    held-out episodes: a run's ``config.yaml``, or the defaults."""
    cfg = OmegaConf.structured(TrainConfig)
    if path is not None:
        cfg.merge_with(OmegaConf.load(path))
    return cfg


def held_out_entries(train: DictConfig, episodes: int) -> list[dict[str, Any]]:
    """Suite entries of ``episodes`` held-out episodes: episode k is task k mod len(tasks)
    with seed ``eval.seed_start + k``."""
    if episodes < 1:
        raise ValueError(f"episodes={episodes} must be >= 1")
    tasks = list(dict.fromkeys(train.data.tasks))
    if not tasks:
        raise ValueError("the training config has no data.tasks")
    seeds: dict[str, list[int]] = {t: [] for t in tasks}
    for k in range(episodes):
        seeds[train.data.tasks[k % len(train.data.tasks)]].append(train.eval.seed_start + k)
    return [
        {"task": t, "split": train.eval.split, "n_agents": [train.data.n_agents], "seeds": s}
        for t, s in seeds.items()
        if s
    ]


def run_config(
    checkpoint: str,
    out: str | Path,
    *,
    adapter: str | None = None,
    train: DictConfig | None = None,
    episodes: int = 200,
    suite: str | None = None,
    workers: int = 2,
    reference: bool = False,
    team: str = "policy",
) -> DictConfig:
    """The runner config that evaluates ``checkpoint`` (``team`` is the registered name or
    ``module:Class`` path of the policy team)."""
    train = train if train is not None else training_config()
    register_configs()
    overrides = ["baseline=policy", "logger.console=false"]
    if suite:
        overrides.append(f"suite={suite}")
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        cfg = compose("run", overrides=overrides)
    if not suite:
        cfg.suite.merge_with(
            {"name": f"rl_eval_{train.eval.split}", "entries": held_out_entries(train, episodes)}
        )
    r = train.rollout
    cfg.baseline.name = team
    cfg.baseline.checkpoint = checkpoint
    cfg.llm.adapter = adapter
    cfg.baseline.kwargs.merge_with(
        {
            "history": r.history,
            "max_objects": r.max_objects,
            "max_tokens": r.max_tokens,
            "temperature": train.eval.temperature,
            "top_p": r.top_p,
            "mode": r.mode,
            "max_context": r.max_context,
        }
    )
    cfg.env = {"reward_sharing": r.reward_sharing, "ambiguity": r.ambiguity}
    cfg.comm = [r.comm]
    cfg.workers = workers
    cfg.reference = reference
    cfg.output_dir = str(Path(out).resolve())
    return cfg


def evaluate_policy(
    checkpoint: str,
    out: str | Path,
    *,
    console: Console | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """Evaluate ``checkpoint`` (a saved policy name or model directory) into the run directory
    ``out`` (``options``: see :func:`run_config`). One row per team size and comm setting:
    ``policy``, ``adapter``, ``run_dir``, ``episodes``, ``errors``, and every summary metric
    as ``NAME``, ``NAME_lo``, ``NAME_hi`` (mean and 95% interval; ``SR``: Clopper-Pearson)."""
    resolve_model_dir(checkpoint)  # a wrong name fails here, not once per episode
    if options.get("adapter"):
        check_adapter(options["adapter"])
    cfg = run_config(checkpoint, out, **options)
    result = run(cfg, console or Console(quiet=True))
    rows = []
    for rec in result["table"]:
        if rec["family"] != "all":
            continue
        row: dict[str, Any] = {
            "policy": checkpoint,
            "adapter": options.get("adapter"),
            "run_dir": str(result["root"]),
            "n_agents": rec["n_agents"],
            "comm": rec["comm"],
            "episodes": rec["episodes"],
            "errors": rec["errors"],
        }
        for name in SUMMARY_METRICS:
            cell = rec[name]
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = cell["mean"], cell["lo"], cell["hi"]
        row.update({name: rec[name] for name in RUN_METRICS})
        rows.append(row)
    return rows


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_row(row: dict[str, Any]) -> str:
    """One line: SR with its interval, TR, L, B, redundancy and messages."""
    adapter = f" + {row['adapter']}" if row["adapter"] else ""
    errors = f", {row['errors']} errors" if row["errors"] else ""
    return (
        f"{row['policy']}{adapter} (n={row['n_agents']}): SR {_num(row['SR'])} "
        f"[{_num(row['SR_lo'])}, {_num(row['SR_hi'])}] TR {_num(row['TR'])} "
        f"L {_num(row['L'], 1)} B {_num(row['B'])} redundancy {_num(row['redundancy'])} "
        f"messages {_num(row['messages'], 1)} ({row['episodes']} episodes{errors})"
    )


def run_name(checkpoint: str, adapter: str | None = None) -> str:
    """A run directory name for a policy: the last two parts of its path (``grpo-final_model``)
    or its name, then the adapter's name."""
    name = "-".join(Path(checkpoint).parts[-2:])
    return f"{name}+{Path(adapter).name}" if adapter else name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policies", nargs="+", help="saved policy names or model directories")
    parser.add_argument(
        "--episodes", type=int, default=200, help="held-out episodes (not with --suite)"
    )
    parser.add_argument(
        "--config", type=Path, default=None, help="a training run's config.yaml (eval settings)"
    )
    parser.add_argument(
        "--suite", default=None, help="a runner suite (configs/suite) instead of held-out seeds"
    )
    parser.add_argument("--adapter", default=None, help="a peft adapter applied to every policy")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (0: inline)")
    parser.add_argument(
        "--reference", action="store_true", help="also run one-agent references (speedup)"
    )
    parser.add_argument("--out", type=Path, default=Path("outputs/rl_eval"))
    args = parser.parse_args(argv)
    names = [run_name(p, args.adapter) for p in args.policies]
    if len(set(names)) != len(names):
        raise SystemExit(f"policies {args.policies} would share run directories {names}")
    train = training_config(args.config)
    rows = []
    for policy, name in zip(args.policies, names, strict=True):
        mine = evaluate_policy(
            policy,
            args.out / name,
            adapter=args.adapter,
            train=train,
            episodes=args.episodes,
            suite=args.suite,
            workers=args.workers,
            reference=args.reference,
        )
        for row in mine:
            print(format_row(row), "->", row["run_dir"], flush=True)
        rows += mine
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "evaluation.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
