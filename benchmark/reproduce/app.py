"""Making the tables: runs (or committed bundles) -> records -> files -> optional check."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from benchmark.paths import REPO_ROOT
from benchmark.reproduce.build import table_records
from benchmark.reproduce.check import committed_problems, fresh_problems
from benchmark.reproduce.render import write_table
from benchmark.reproduce.sources import RunData, fresh_run, read_bundles, read_run_dir
from benchmark.reproduce.spec import TableSpec, check_shared_runs, load_table, table_names
from benchmark.reproduce.training import (
    curves_path,
    load_curves,
    read_curves,
    run_training,
    write_curves,
)

SOURCES = ("fresh", "reference")
FRESH_RUNS = ("all", "deterministic")


@dataclass
class Options:
    """The command's options (``configs/reproduce.yaml``)."""

    table: str = "main"
    output_dir: str = "outputs/paper"
    source: str = "fresh"
    short: bool = False
    check: bool = False
    workers: int = 0
    fresh_runs: str = "all"
    reference_dir: str = "leaderboard/data/paper"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source={self.source!r}: expected one of {SOURCES}")
        if self.short and self.source != "fresh":
            raise ValueError("short=true runs fresh episodes: it needs source=fresh")
        if self.fresh_runs not in FRESH_RUNS:
            raise ValueError(f"fresh_runs={self.fresh_runs!r}: expected one of {FRESH_RUNS}")
        if not isinstance(self.workers, int) or self.workers < 0:
            raise ValueError(f"workers={self.workers!r}: expected an integer >= 0")

    @property
    def references(self) -> Path:
        path = Path(self.reference_dir)
        return path if path.is_absolute() else REPO_ROOT / path

    @property
    def out(self) -> Path:
        return Path(self.output_dir).resolve()


@dataclass
class Outcome:
    """One table made: its files, and the check's problems (empty when it holds)."""

    spec: TableSpec
    files: list[Path]
    problems: list[str] = field(default_factory=list)
    checked: bool = False


def committed_runs(spec: TableSpec, references: Path) -> list[RunData]:
    return [read_bundles(r, references) for r in spec.runs]


def _fresh_runs(spec: TableSpec, opts: Options, runs_dir: Path) -> list[RunData]:
    """Run (or resume) the table's runs, its training first; with ``fresh_runs=deterministic``
    the sampled runs (and so any training) are read from the committed bundles instead."""
    fresh = [opts.fresh_runs == "all" or r.deterministic for r in spec.runs]
    train = spec.training
    if train is not None and any(f and r.source for f, r in zip(fresh, spec.runs, strict=True)):
        run_training(train, runs_dir / train.out, opts.short)
    return [
        (
            read_bundles(r, opts.references)
            if not f
            else read_run_dir(r, spec.run_dir(runs_dir, r))
            if r.source
            else fresh_run(r, runs_dir / r.id, opts.workers, opts.short)
        )
        for f, r in zip(fresh, spec.runs, strict=True)
    ]


def _curve_files(spec: TableSpec, opts: Options, runs_dir: Path, out_dir: Path) -> list[Path]:
    """The training's learning curves, from the fresh training when there is one."""
    train = spec.training
    if train is None:
        return []
    trained = runs_dir / train.out / train.done
    if opts.source == "fresh" and opts.fresh_runs == "all" and trained.exists():
        curves = read_curves(train, runs_dir / train.out)
    else:
        curves = load_curves(curves_path(spec, opts.references))
    return write_curves(out_dir, spec, curves)


def make_table(spec: TableSpec, opts: Options) -> Outcome:
    """Build one table (and check it when asked)."""
    runs_dir = opts.out / ("runs-short" if opts.short else "runs")
    if opts.source == "reference":
        runs = committed_runs(spec, opts.references)
    else:
        runs = _fresh_runs(spec, opts, runs_dir)
    out_dir = opts.out / "short" if opts.short else opts.out
    files = write_table(out_dir, spec, table_records(spec, runs))
    files += _curve_files(spec, opts, runs_dir, out_dir)
    outcome = Outcome(spec, files)
    if opts.check:
        outcome.checked = True
        committed = committed_runs(spec, opts.references)
        csv_path = opts.references / "tables" / f"{spec.name}.csv"
        if opts.source == "fresh":
            outcome.problems += fresh_problems(spec, runs, committed)
        if not opts.short:
            outcome.problems += committed_problems(spec, committed, csv_path)
    return outcome


def reproduce(opts: Options) -> list[Outcome]:
    """Every table ``opts.table`` names, in order."""
    check_shared_runs()
    return [make_table(load_table(name), opts) for name in table_names(opts.table)]
