"""Comparing a table with its committed reference, cell by cell.

Two checks, each returning the problems found (empty: the table holds), every one naming the
table, the row and the column:

* :func:`committed_problems`: the committed CSV equals the table rebuilt from the committed
  bundles, exactly (a change to the simulator, the tasks or the metrics that moves a published
  number shows here without running anything).
* :func:`fresh_problems`: a fresh run against the committed one, on the episodes the fresh run
  holds (all of them, or the few seeds of a short run). Every fresh episode must be in the
  reference. A deterministic run (scripted teams, greedy decoding on one machine) must give the
  same trace hash per episode and the same cells exactly; a sampled one must land each cell's
  mean inside the committed interval of the same episodes (a cell of one sampled episode states
  no interval and is not compared; the cells grouping it with others are).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from benchmark.reproduce.build import Record, table_records
from benchmark.reproduce.render import PARTS, csv_header, csv_rows, read_csv
from benchmark.reproduce.sources import RunData
from benchmark.reproduce.spec import TableSpec

TOLERANCE = 1e-9


def _name(spec: TableSpec, group: Sequence[str]) -> str:
    return f"{spec.name}: " + "/".join(group)


def committed_problems(spec: TableSpec, committed: Sequence[RunData], csv_path: Path) -> list[str]:
    """Differences between the committed CSV and the table rebuilt from the bundles."""
    if not csv_path.is_file():
        return [f"{spec.name}: no committed table {csv_path}"]
    written = read_csv(csv_path)
    header = csv_header(spec)
    if written and list(written[0]) != header:
        return [f"{spec.name}: {csv_path} has columns {list(written[0])}, the table {header}"]
    rebuilt = {
        tuple(r[: len(spec.rows)]): r for r in csv_rows(spec, table_records(spec, committed))
    }
    have = {tuple(r[f] for f in spec.rows): r for r in written}
    problems = [
        f"{_name(spec, g)}: in the rebuilt table, not in {csv_path.name}"
        for g in rebuilt.keys() - have
    ]
    problems += [
        f"{_name(spec, g)}: in {csv_path.name}, not in the rebuilt table"
        for g in have.keys() - rebuilt
    ]
    for g in sorted(rebuilt.keys() & have.keys()):
        for h, new in zip(header, rebuilt[g], strict=True):
            if new != have[g][h]:
                problems.append(f"{_name(spec, g)} {h}: rebuilt {new}, committed {have[g][h]}")
    return problems


def _restricted(run: RunData, keys: set[str]) -> RunData:
    return RunData(run.spec, [r for r in run.rows if r["key"] in keys], run.load_trace, run.origin)


def _episode_problems(fresh: RunData, committed: RunData) -> list[str]:
    want = {r["key"]: r for r in committed.rows}
    problems = []
    for r in fresh.rows:
        ref = want.get(r["key"])
        where = f"run {fresh.spec.id}: episode {r['key']}"
        if r["status"] != "ok":
            problems.append(f"{where}: status {r['status']!r} ({r.get('error', '')})")
        elif ref is None:
            problems.append(f"{where}: not in the committed reference ({committed.origin})")
        elif fresh.spec.deterministic and r.get("trace_hash") != ref.get("trace_hash"):
            problems.append(
                f"{where}: trace hash {str(r.get('trace_hash'))[:12]} differs from the "
                f"committed {str(ref.get('trace_hash'))[:12]}"
            )
    return problems


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def _cell_problems(spec: TableSpec, group: tuple, column: str, new: dict, old: dict, exact: bool):
    where = f"{_name(spec, group)} {column}"
    if exact:
        return [
            f"{where} {p}: fresh {new.get(p)}, committed {old.get(p)}"
            for p in PARTS
            if not _close(new.get(p), old.get(p))
        ]
    if (old.get("n") or 0) < 2:
        return []  # one sampled episode states no interval to land in
    mean, lo, hi = new.get("mean"), old.get("lo"), old.get("hi")
    if mean is None or lo is None or hi is None:
        return [] if _close(mean, old.get("mean")) else [f"{where}: fresh {mean}, committed {old}"]
    if not lo - TOLERANCE <= mean <= hi + TOLERANCE:
        return [
            f"{where}: fresh mean {mean:.4f} outside the committed interval [{lo:.4f}, {hi:.4f}]"
        ]
    return []


def fresh_problems(
    spec: TableSpec, fresh: Sequence[RunData], committed: Sequence[RunData]
) -> list[str]:
    """Differences between fresh runs and the committed ones (module docstring)."""
    by_id = {c.spec.id: c for c in committed}
    problems: list[str] = []
    restricted = []
    for run in fresh:
        ref = by_id[run.spec.id]
        problems += _episode_problems(run, ref)
        restricted.append(_restricted(ref, {r["key"] for r in run.rows}))
    exact_labels = {r.spec.label for r in fresh if r.spec.deterministic}
    new = {tuple(r[f] for f in spec.rows): r for r in table_records(spec, fresh)}
    old = {tuple(r[f] for f in spec.rows): r for r in table_records(spec, restricted)}
    for g in sorted(new.keys() ^ old.keys()):
        side = "fresh" if g in new else "committed"
        problems.append(f"{_name(spec, g)}: only in the {side} table")
    for g in sorted(new.keys() & old.keys()):
        rec_new: Record = new[g]
        label = rec_new.get("run_label", rec_new.get("baseline"))
        exact = label in exact_labels if label is not None else len(exact_labels) == len(fresh)
        if rec_new["errors"] != old[g]["errors"]:
            problems.append(
                f"{_name(spec, g)}: {rec_new['errors']} failed episode(s), "
                f"committed {old[g]['errors']}"
            )
        for column in spec.columns:
            problems += _cell_problems(spec, g, column, rec_new[column], old[g][column], exact)
    return problems
