"""A table's records from its runs' episodes.

``summary`` tables group the result episodes (ok, not one-agent reference jobs; each joined with
its reference for speedup, parallel efficiency and EI) by the table's row fields, and give each
column's mean and 95% interval: a declared metric with its own method (Clopper-Pearson for SR,
Student-t otherwise, clipped to its range), a run-level metric as one value over the group's
traces, any other numeric row field with a Student-t interval. ``family`` and ``level`` also
take the value ``all`` (every family, every level). Failed episodes are counted per group in
``errors``, never silently dropped.

``comm`` tables pair each comm-on episode with the comm-off episode of the same run label,
task, scene, seed and team size, and give the mean difference (on - off) per column with a
Student-t interval; a column ``<metric>@on`` (``@off``) gives the metric itself over the comm-on
(comm-off) episodes instead, for metrics with no value without messages (influence).

``crossplay`` tables (:mod:`benchmark.reproduce.crossplay`) pair each partner run's episodes
with its focal run's self-play (:func:`crossplay_records`).
"""

from __future__ import annotations

import functools
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from benchmark.metrics.episode import run_metrics
from benchmark.metrics.specs import BY_NAME
from benchmark.reproduce.sources import Row, RunData
from benchmark.reproduce.spec import TableSpec
from benchmark.results.crossplay import crossplay_table
from benchmark.results.references import with_reference
from benchmark.results.summary import RUN_METRICS, interval_cell

Record = dict[str, Any]
_ALL = "all"


def _field(row: Row, name: str) -> str:
    value = row.get(name)
    return _ALL if value is None else str(value)


def _group_values(row: Row, spec: TableSpec) -> list[tuple[str, ...]]:
    """The groups (one value per row field) a row counts in."""
    options = []
    for name in spec.rows:
        if name in ("family", "level"):
            options.append(list(dict.fromkeys((_field(row, name), _ALL))))
        else:
            options.append([_field(row, name)])
    return list(itertools.product(*options))


def _kept(group: tuple[str, ...], row: Row, spec: TableSpec) -> bool:
    """Whether a group passes the table's ``where`` filter."""
    values = dict(zip(spec.rows, group, strict=True))
    for name, wanted in spec.where.items():
        allowed = [str(w) for w in (wanted if isinstance(wanted, list) else [wanted])]
        have = values[name] if name in values else _field(row, name)
        if have not in allowed:
            return False
    return True


def _order(spec: TableSpec, runs: Sequence[RunData]) -> Any:
    """Sort key of a group: runs in the table's order, numbers numerically, ``all`` last."""
    labels = {r.spec.label: i for i, r in enumerate(runs)}

    def key(group: tuple[str, ...]) -> tuple:
        out: list[tuple] = []
        for name, value in zip(spec.rows, group, strict=True):
            if name == "baseline":
                out.append((0, labels.get(value, len(labels)), ""))
            elif value == _ALL:
                out.append((2, 0, ""))
            elif value.lstrip("-").isdigit():
                out.append((0, int(value), ""))
            else:
                out.append((1, 0, value))
        return tuple(out)

    return key


def _column_cell(column: str, members: list[Row], traces: Any) -> dict[str, Any]:
    spec = BY_NAME.get(column)
    if column in RUN_METRICS:
        value = run_metrics(traces(members))[column] if members else None
        return {"mean": value, "lo": None, "hi": None, "n": len(members)}
    values = [m.get(column) for m in members]
    bad = [v for v in values if v is not None and not isinstance(v, int | float)]
    if bad:
        raise ValueError(f"column {column!r} is not numeric in the rows: {bad[:3]}")
    return interval_cell(values, spec)


def _errors(rows: list[Row], spec: TableSpec) -> dict[tuple[str, ...], int]:
    """Failed run episodes (not references) per group."""
    errors: dict[tuple[str, ...], int] = defaultdict(int)
    for r in rows:
        if r["status"] != "ok" and not r.get("reference"):
            for g in _group_values(r, spec):
                if _kept(g, r, spec):
                    errors[g] += 1
    return errors


def _every_run_kept(spec: TableSpec, runs: Sequence[RunData], kept_labels: set[str]) -> None:
    """A ``where`` filter that keeps no episode of a run is an error naming the runs, not a row
    silently missing from the table (a misspelt value, say)."""
    dropped = [run.spec.id for run in runs if run.rows and run.spec.label not in kept_labels]
    if dropped:
        raise ValueError(
            f"table {spec.name}: its filter where={spec.where} keeps no episode of run(s) "
            f"{dropped} (a value no row has?)"
        )


def summary_records(spec: TableSpec, runs: Sequence[RunData]) -> list[Record]:
    """The records of a ``summary`` table (see the module docstring)."""
    rows = [r for run in runs for r in run.labelled()]
    loaders = {run.spec.label: run.load_trace for run in runs}
    groups: dict[tuple[str, ...], list[Row]] = defaultdict(list)
    kept_labels: set[str] = set()
    for r in with_reference(rows):
        for g in _group_values(r, spec):
            if _kept(g, r, spec):
                groups[g].append(r)
                kept_labels.add(r["baseline"])
    _every_run_kept(spec, runs, kept_labels)
    errors = _errors(rows, spec)
    for g in errors:
        groups.setdefault(g, [])

    def traces(members: list[Row]) -> Iterable[dict[str, Any]]:
        return (loaders[m["baseline"]](m) for m in members)

    out = []
    for g in sorted(groups, key=_order(spec, runs)):
        members = groups[g]
        rec: Record = dict(zip(spec.rows, g, strict=True))
        rec["episodes"] = len(members)
        rec["errors"] = errors[g]
        for column in spec.columns:
            rec[column] = _column_cell(column, members, traces)
        out.append(rec)
    return out


def _pair_key(row: Row) -> tuple:
    return (row["baseline"], row["task"], row["scene"], row["seed"], row["n_agents"])


def comm_records(spec: TableSpec, runs: Sequence[RunData]) -> list[Record]:
    """The records of a ``comm`` table: paired on - off differences (module docstring)."""
    rows = [r for run in runs for r in run.labelled()]
    results = with_reference(rows)
    by = {(_pair_key(r), r["comm"]): r for r in results}
    groups: dict[tuple[str, ...], list[tuple[Row, Row]]] = defaultdict(list)
    kept_labels: set[str] = set()
    for (key, comm), on in by.items():
        off = by.get((key, False))
        if not comm or off is None:
            continue
        for g in _group_values(on, spec):
            if _kept(g, on, spec):
                groups[g].append((on, off))
                kept_labels.add(on["baseline"])
    _every_run_kept(spec, runs, kept_labels)
    errors = _errors(rows, spec)
    unpaired = [r for r in results if (_pair_key(r), not r["comm"]) not in by]
    if unpaired:
        raise ValueError(
            f"table {spec.name}: {len(unpaired)} episode(s) have no partner with the other comm "
            f"setting, e.g. {unpaired[0]['key']}"
        )
    out = []
    for g in sorted(groups, key=_order(spec, runs)):
        pairs = groups[g]
        rec: Record = dict(zip(spec.rows, g, strict=True))
        rec["episodes"] = len(pairs)
        rec["errors"] = errors[g]
        for column in spec.columns:
            name, _, side = column.partition("@")
            if side:  # the value with comm on (or off) itself, not a difference
                values = [pair[side == "off"].get(name) for pair in pairs]
                rec[column] = interval_cell(values, BY_NAME.get(name))
                continue
            diffs = [
                on[name] - off[name]
                for on, off in pairs
                if on.get(name) is not None and off.get(name) is not None
            ]
            rec[column] = interval_cell(diffs, None)
        out.append(rec)
    return out


def _cell(rec: Mapping[str, Any], column: str) -> dict[str, Any]:
    name, _, side = column.partition("@")
    key = f"{name}_{side}" if side else name
    lo, hi = rec.get(f"{key}_ci") or (None, None)
    return {"mean": rec.get(key), "lo": lo, "hi": hi, "n": rec["episodes"]}


def _load_from(loaders: Mapping[str | None, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    return loaders[row.get("partner")](row)


def crossplay_records(columns: Sequence[str], runs: Sequence[RunData]) -> list[Record]:
    """One record per (focal run, partner): ``baseline`` (the focal run's label), ``partner``,
    ``episodes`` (paired), ``errors`` (the partner run's failed episodes) and the columns."""
    out: list[Record] = []
    for focal in (r for r in runs if not r.spec.focal):
        group = [focal, *(r for r in runs if r.spec.focal == focal.spec.id)]
        rows: list[Row] = []
        loaders = {}
        for run in group:
            partner = run.spec.partner or None
            loaders[partner] = run.load_trace
            rows += [{**r, "partner": partner} for r in run.rows]

        load_trace = functools.partial(_load_from, loaders)

        errors = {run.spec.partner: sum(r.get("status") != "ok" for r in run.rows) for run in group}
        labels = {run.spec.partner: run.spec.label for run in group}
        for rec in crossplay_table(rows, load_trace):
            out.append(
                {
                    "baseline": focal.spec.label,
                    "partner": rec["partner"],
                    "run_label": labels[rec["partner"]],
                    "episodes": rec["episodes"],
                    "errors": errors[rec["partner"]],
                    **{column: _cell(rec, column) for column in columns},
                }
            )
    return out


def table_records(spec: TableSpec, runs: Sequence[RunData]) -> list[Record]:
    """The table's records, by its kind."""
    if spec.kind == "comm":
        return comm_records(spec, runs)
    if spec.kind == "crossplay":
        return crossplay_records(spec.columns, runs)
    return summary_records(spec, runs)
