"""``python -m benchmark.compare RUN RUN ...``: models compared on the same episodes.

Each run, a run directory (written by ``python -m benchmark.run``) or a committed bundle of one
(``leaderboard/data/paper/<run id>.<track>.tar.gz``), holds one model's episodes; the
episodes are paired across the runs by task, scene split, team size and seed (and messages on or
off, unless ``--across-comm``, which pairs a run with messages off against one with them on).
Only the episodes every run played are compared; one-agent reference rows are left out. For each
run: its SR with the exact (Clopper-Pearson) 95% interval, and the means of ``--metrics``; for
each run after the first, against the first: the paired SR difference, the discordant episodes
(solved by one model only) and the exact McNemar p-value. Overall and per task family.

    python -m benchmark.compare outputs/eval-base outputs/eval-sft outputs/eval-dagger
    python -m benchmark.compare RUN_A RUN_B --json compare.json
    python -m benchmark.compare leaderboard/data/paper/llm-dagger.*.tar.gz \
        leaderboard/data/paper/llm-grpo.*.tar.gz
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.metrics.stats import clopper_pearson, mcnemar_exact
from benchmark.results.bundles import BundleError, bundle_members, bundle_rows
from benchmark.results.markdown import markdown_table
from benchmark.results.run_dir import RunDirectory

METRICS = ("TR", "B", "messages", "influence_rate", "redundancy", "L")


def pair_key(row: dict[str, Any], across_comm: bool) -> tuple[Any, ...]:
    key = (row["task"], row["split"], row["n_agents"], row["seed"])
    return key if across_comm else (*key, bool(row["comm"]))


def load_rows(run: Path, across_comm: bool) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The run's episode rows (references and error rows left out) by pairing key; ``run`` is a
    run directory or a bundle (``*.tar.gz``)."""
    if run.is_file() and run.name.endswith(".tar.gz"):
        try:
            every = bundle_rows(bundle_members(run))
        except BundleError as err:
            raise ValueError(str(err)) from err
    elif (run / "episodes.jsonl").is_file():
        every = RunDirectory(run).rows()
    else:
        raise ValueError(f"{run} is neither a run directory (no episodes.jsonl) nor a bundle")
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in every:
        if row.get("reference") or row.get("status", "ok") != "ok":
            continue
        key = pair_key(row, across_comm)
        if key in rows:
            raise ValueError(
                f"{run}: two episodes pair as {key} (a run with messages on and off? compare "
                "runs of one setting, or pass --across-comm only between such runs)"
            )
        rows[key] = row
    return rows


def _summary(rows: list[dict[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    wins = sum(r["SR"] >= 1 for r in rows)
    lo, hi = clopper_pearson(wins, len(rows))
    out: dict[str, Any] = {"episodes": len(rows), "SR": wins / len(rows), "SR_lo": lo, "SR_hi": hi}
    for name in metrics:
        values = [float(r[name]) for r in rows if r.get(name) is not None]
        out[name] = sum(values) / len(values) if values else None
    return out


def _paired(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    only_a = sum(x["SR"] >= 1 > y["SR"] for x, y in zip(a, b, strict=True))
    only_b = sum(y["SR"] >= 1 > x["SR"] for x, y in zip(a, b, strict=True))
    n = len(a)
    return {
        "SR_diff": (sum(y["SR"] >= 1 for y in b) - sum(x["SR"] >= 1 for x in a)) / n,
        "only_first": only_a,
        "only_this": only_b,
        "mcnemar_p": mcnemar_exact(only_a, only_b),
    }


def compare(
    runs: Sequence[Path], across_comm: bool = False, metrics: Sequence[str] = METRICS
) -> dict[str, Any]:
    """The comparison (module docstring) as a dict: ``groups`` (``all`` and each family) ->
    one entry per run, in order."""
    if len(runs) < 2:
        raise ValueError("compare needs at least two runs")
    tables = [load_rows(Path(r), across_comm) for r in runs]
    common = set(tables[0]).intersection(*tables[1:])
    if not common:
        raise ValueError("the runs share no episode (same tasks, splits, team sizes and seeds)")
    keys = sorted(common, key=str)
    families = sorted({tables[0][k]["family"] for k in keys})
    groups: dict[str, list[dict[str, Any]]] = {}
    for group in ["all", *families]:
        chosen = [k for k in keys if group == "all" or tables[0][k]["family"] == group]
        first = [tables[0][k] for k in chosen]
        entries = []
        for run, table in zip(runs, tables, strict=True):
            rows = [table[k] for k in chosen]
            entry = {"run": str(run), **_summary(rows, metrics)}
            if table is not tables[0]:
                entry.update(_paired(first, rows))
            entries.append(entry)
        groups[group] = entries
    left_out = {str(r): len(t) - len(common) for r, t in zip(runs, tables, strict=True)}
    return {"paired_episodes": len(keys), "left_out": left_out, "groups": groups}


def run_name(run: str) -> str:
    """How a run is named in the table: its directory's name, or its bundle's run id."""
    name = Path(run).name
    return name.split(".", 1)[0] if name.endswith(".tar.gz") else name


def to_markdown(result: dict[str, Any], metrics: Sequence[str] = METRICS) -> str:
    head = [
        "group",
        "run",
        "episodes",
        "SR [95% exact]",
        *metrics,
        "SR diff",
        "only first / only this",
        "McNemar p",
    ]
    rows = []
    for group, entries in result["groups"].items():
        for e in entries:
            cells = [
                group,
                run_name(e["run"]),
                str(e["episodes"]),
                f"{e['SR']:.2f} [{e['SR_lo']:.2f}, {e['SR_hi']:.2f}]",
                *("-" if e[m] is None else f"{e[m]:.3g}" for m in metrics),
            ]
            if "SR_diff" in e:
                cells += [
                    f"{e['SR_diff']:+.2f}",
                    f"{e['only_first']} / {e['only_this']}",
                    f"{e['mcnemar_p']:.3g}",
                ]
            else:
                cells += ["", "", ""]
            rows.append(cells)
    return "\n".join(markdown_table(head, rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmark.compare", description=__doc__)
    parser.add_argument(
        "runs", nargs="+", type=Path, help="run directories or bundles, the first the baseline"
    )
    parser.add_argument("--across-comm", action="store_true", help="pair messages on with off")
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args(argv)
    try:
        result = compare(args.runs, args.across_comm)
    except ValueError as err:
        parser.exit(2, f"compare: error: {err}\n")
    print(
        f"{result['paired_episodes']} paired episodes; left out (not in every run): "
        f"{result['left_out']}\n"
    )
    print(to_markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
