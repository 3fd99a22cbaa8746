"""``python -m leaderboard.tools.paper``: commit a reproduction's runs as the reference bundles.

    python -m leaderboard.tools.paper [--runs outputs/paper/runs] [--out leaderboard/data/paper]
        [--table all] [--run RUN_ID ...]

For every run of the chosen tables (``configs/paper/<table>.yaml``) it packs each track the run
directory holds into ``<out>/<run id>.<track key>.tar.gz``
(:func:`leaderboard.client.pack.pack_run`: every episode of the track must have finished), then
rebuilds the tables from those bundles and writes them under ``<out>/tables/``, so that the
committed tables are exactly what the committed bundles give. A table with a training stage also
gets its learning curves committed, as ``<out>/<table>.curves.jsonl`` (the training runs' held-out
evaluations). ``--run`` packs only the named runs (a new row) and keeps the other runs' committed
bundles: the tables are still rebuilt from all of them. ``python -m leaderboard.tools.seed`` submits
these bundles to a fresh board, and ``make test`` replays them and rebuilds the tables
(tests/test_paper_reference.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmark.paths import REPO_ROOT
from benchmark.reproduce.app import Options, make_table
from benchmark.reproduce.sources import SourceError
from benchmark.reproduce.spec import TableSpec, load_table, table_names
from benchmark.reproduce.training import curves_path, read_curves, save_curves
from benchmark.results.run_dir import read_run
from leaderboard.client.pack import describe, pack_run
from leaderboard.core.tracks import tracks_of_run

DEFAULT_OUT = REPO_ROOT / "leaderboard" / "data" / "paper"


def _owner(run_id: str, spec: TableSpec) -> str:
    """The first paper table holding the run (a run shared by tables is packed the same way by
    each of them); ``spec``'s own name for a table outside configs/paper/."""
    for name in table_names("all"):
        if name == spec.name or any(r.id == run_id for r in load_table(name).runs):
            return name
    return spec.name


def pack_table(spec: TableSpec, runs_dir: Path, out: Path, only: Sequence[str] = ()) -> list[Path]:
    """The bundles of every run of ``spec`` (of the runs named in ``only`` when given, and then
    no learning curves); stale bundles of those runs are removed first."""
    unknown = sorted(set(only) - {r.id for r in spec.runs})
    if unknown:
        raise ValueError(
            f"table {spec.name} has no run {', '.join(map(repr, unknown))}; "
            f"its runs are {[r.id for r in spec.runs]}"
        )
    written = []
    for run_spec in spec.runs:
        if only and run_spec.id not in only:
            continue
        root = spec.run_dir(runs_dir, run_spec)
        run = read_run(root)
        tracks = sorted(tracks_of_run(run), key=lambda t: t.key)
        if not tracks:
            raise ValueError(f"{root}: no finished episode to pack")
        for stale in out.glob(f"{run_spec.id}.*.tar.gz"):
            stale.unlink()
        submission = describe(
            run,
            method=run_spec.label,
            description=f"Reference run {run_spec.id} of the paper's {_owner(run_spec.id, spec)} "
            "table.",
        )
        for track in tracks:
            path = out / f"{run_spec.id}.{track.key}.tar.gz"
            written.append(pack_run(root, path, submission, track))
    if spec.training is not None and not only:
        curves = read_curves(spec.training, runs_dir / spec.training.out)
        written.append(save_curves(curves, curves_path(spec, out)))
    return written


def _holding(specs: list[TableSpec], run_ids: Sequence[str]) -> list[TableSpec]:
    """The tables holding any of ``run_ids``; a run in none of them is an error."""
    known = {r.id for spec in specs for r in spec.runs}
    unknown = [r for r in run_ids if r not in known]
    if unknown:
        raise ValueError(
            f"no run {', '.join(map(repr, unknown))} in table(s) {[s.name for s in specs]}"
        )
    return [spec for spec in specs if any(r.id in run_ids for r in spec.runs)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leaderboard.tools.paper", description=__doc__)
    parser.add_argument("--runs", default="outputs/paper/runs", help="the reproduction's runs")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="where the bundles go")
    parser.add_argument("--table", default="all", help="a table name, or all")
    parser.add_argument(
        "--run",
        action="append",
        default=[],
        help="pack only this run of the table (repeatable); the others keep their bundles",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        specs = [load_table(name) for name in table_names(args.table)]
        if args.run:
            specs = _holding(specs, args.run)
        packed: set[str] = set()
        for spec in specs:
            only = [r.id for r in spec.runs if r.id in args.run and r.id not in packed]
            # with --run, a table whose named runs an earlier table packed is only rebuilt
            skip = bool(args.run) and not only
            paths = [] if skip else pack_table(spec, Path(args.runs), out, only)
            packed.update(only)
            for path in paths:
                print(f"packed {path} ({path.stat().st_size} bytes)")
            opts = Options(table=spec.name, source="reference", reference_dir=str(out.resolve()))
            opts.output_dir = str(out / "tables")
            made = make_table(spec, opts)
            print(f"table {spec.name}: " + ", ".join(str(p) for p in made.files))
    except (ValueError, OSError, SourceError) as err:
        print(f"paper: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
