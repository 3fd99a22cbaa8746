"""What a paper table is made of: its runs, its rows and columns, its figure.

Each table is a YAML file ``configs/paper/<name>.yaml``:

.. code-block:: yaml

    name: main
    title: Main results
    caption: ...                # printed under the table; states the intervals
    kind: summary               # summary: metrics per group of episodes; comm: paired deltas
    runs:                       # each one ``python -m benchmark.run`` invocation
      - id: main-heuristic      # the run's directory and its committed bundles' prefix
        label: heuristic        # how the run is named in the table
        overrides: [baseline=heuristic, suite=paper, reference=false]
        deterministic: true     # same seeds, same traces: checked exactly
        short: [seeds=[0]]      # the few-seed fresh run of CI (appended to overrides)
    rows: [baseline, family]    # the row fields, in order
    where: {level: all}         # keep only these groups
    columns: [SR, TR, C, B, L, llm/tokens_in]
    figure: {metric: SR, x: family, series: baseline, kind: bar, where: {}}

A table of trained policies first trains them (``training``), then reads runs the training
wrote (``from`` instead of ``overrides``) and plots the training runs' held-out curves:

.. code-block:: yaml

    training:
      module: baselines.rl.recipes.recipe  # python -m <module> <args>, {out} its output dir
      args: [--out, "{out}", --minutes, "15"]
      short: [--minutes, "0.2"]         # appended to args for the few-seed CI run
      done: final_eval.json             # present once the training has finished (then skipped)
      curves: {GRPO: grpo}              # label -> training run directory (its metrics.jsonl)
    runs:
      - {id: rl-grpo, label: GRPO, deterministic: false, from: final_eval/grpo}

Row fields are those of the episode rows (``baseline`` being the run's label) plus ``level``
(``all`` or the task's source-suite level) and ``family`` (a family or ``all``). Columns are
declared metrics (:mod:`benchmark.metrics.specs`: their own interval method and range) or
numeric row fields (Student-t interval).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmark.metrics.specs import BY_NAME
from benchmark.paths import CONFIGS_DIR
from benchmark.reproduce.crossplay import COLUMNS as CROSSPLAY_COLUMNS
from benchmark.reproduce.crossplay import expand_runs

TABLES_DIR = CONFIGS_DIR / "paper"
TABLE_NAMES = ("main", "mapthor", "scaling", "comm", "decomposition", "rl", "llm", "crossplay")
KINDS = ("summary", "comm", "crossplay")
ROW_FIELDS = ("baseline", "family", "level", "n_agents", "comm", "task", "suite", "partner")
FIGURE_KINDS = ("bar", "line")
DEFAULT_SHORT = ("seeds=[0]",)


class SpecError(ValueError):
    """A table file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class RunSpec:
    """One run of a table (see the module docstring)."""

    id: str
    label: str
    overrides: tuple[str, ...]
    deterministic: bool
    short: tuple[str, ...] = DEFAULT_SHORT
    source: str = ""  # ``from``: a run directory the table's training wrote (no run of its own)
    focal: str = ""  # crossplay: the id of the focal team's self-play run (set on partner runs)
    partner: str = ""  # crossplay: the partner's label (set on partner runs)


@dataclass(frozen=True)
class TrainingSpec:
    """The command that trains a table's policies (see the module docstring)."""

    module: str
    args: tuple[str, ...]
    done: str
    curves: tuple[tuple[str, str], ...]  # (label, training run directory), in order
    short: tuple[str, ...] = ()
    out: str = "training"  # its directory next to the runs'


@dataclass(frozen=True)
class FigureSpec:
    """The table's figure: ``metric`` against row field ``x``, one bar group or line per value
    of row field ``series``, over the records matching ``where`` (row field -> value)."""

    metric: str
    x: str
    series: str
    kind: str = "bar"
    where: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TableSpec:
    """One paper table (see the module docstring)."""

    name: str
    title: str
    caption: str
    kind: str
    runs: tuple[RunSpec, ...]
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    where: dict[str, Any] = field(default_factory=dict)
    figure: FigureSpec | None = None
    published: str = ""  # figures of other papers quoted beside ours, as markdown
    training: TrainingSpec | None = None

    def run_dir(self, runs_dir: Path, run: RunSpec) -> Path:
        """Where ``run``'s directory is among a reproduction's runs."""
        if run.source and self.training is not None:
            return runs_dir / self.training.out / run.source
        return runs_dir / run.id

    def run(self, run_id: str) -> RunSpec:
        for r in self.runs:
            if r.id == run_id:
                return r
        raise KeyError(f"table {self.name} has no run {run_id!r}")


def _need(data: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise SpecError(f"{where}: missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise SpecError(f"{where}.{key}: expected {names}, got {value!r}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _mapping(data: Any, fields: set[str], where: str) -> dict[str, Any]:
    """``data`` as a mapping of only ``fields``; SpecError naming what is wrong otherwise."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping, got {data!r}")
    unknown = set(data) - fields
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {sorted(unknown)}")
    return data


def _inside(path: Any, where: str) -> str:
    """A relative path that stays inside its folder; SpecError otherwise."""
    if not isinstance(path, str) or not path or path.startswith("/") or ".." in Path(path).parts:
        raise SpecError(f"{where}: {path!r} must be a relative path inside the training")
    return path


def _run(data: Any, where: str) -> RunSpec:
    fields = {"id", "label", "overrides", "deterministic", "short", "from", "focal", "partner"}
    data = _mapping(data, fields, where)
    run_id = _need(data, "id", str, where)
    if not run_id.replace("-", "").replace("_", "").isalnum():
        raise SpecError(f"{where}.id: {run_id!r} must be letters, digits, '-' or '_'")
    source = data.get("from", "")
    if source:
        _inside(source, f"{where}.from")
        if data.get("overrides") or "short" in data:
            raise SpecError(f"{where}: a run read 'from' the training has no overrides or short")
        overrides: tuple[str, ...] = ()
    else:
        overrides = _strings(_need(data, "overrides", list, where), f"{where}.overrides")
    for o in overrides:
        if o.split("=", 1)[0] in ("output_dir", "workers"):
            raise SpecError(f"{where}.overrides: {o!r} is set by the reproduce command")
    return RunSpec(
        id=run_id,
        label=_need(data, "label", str, where),
        overrides=overrides,
        deterministic=_need(data, "deterministic", bool, where),
        short=_strings(data.get("short", list(DEFAULT_SHORT)), f"{where}.short"),
        source=source,
        focal=str(data.get("focal") or ""),
        partner=str(data.get("partner") or ""),
    )


def _training(data: Any, where: str) -> TrainingSpec:
    data = _mapping(data, {"module", "args", "short", "done", "curves", "out"}, where)
    args = _strings(_need(data, "args", list, where), f"{where}.args")
    if "{out}" not in args:
        raise SpecError(f"{where}.args: must pass the output directory as '{{out}}'")
    curves = _need(data, "curves", dict, where)
    if not curves or not all(isinstance(v, str) for v in curves.values()):
        raise SpecError(f"{where}.curves: expected label: run directory pairs, got {curves!r}")
    return TrainingSpec(
        module=_need(data, "module", str, where),
        args=args,
        done=_inside(_need(data, "done", str, where), f"{where}.done"),
        curves=tuple((str(k), _inside(v, f"{where}.curves.{k}")) for k, v in curves.items()),
        short=_strings(data.get("short", []), f"{where}.short"),
        out=_inside(data.get("out", "training"), f"{where}.out"),
    )


def _column(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}: expected a metric or row field name, got {name!r}")
    if name.partition("@")[2] not in ("", "on", "off"):
        raise SpecError(f"{where}: {name!r}: a column may end in @on or @off only")
    return name


def parse_table(data: Any, path: Path) -> TableSpec:
    """The table described by ``data`` (the parsed YAML of ``path``); SpecError naming the
    field otherwise."""
    where = str(path)
    if not isinstance(data, dict):
        raise SpecError(f"{where}: expected a mapping at the top level")
    known = {"name", "title", "caption", "kind", "runs", "rows", "columns", "where", "figure"}
    known |= {"training", "population", "sampled"}
    unknown = set(data) - known - {"published"}
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(known)}")
    kind = data.get("kind", "summary")
    if kind not in KINDS:
        raise SpecError(f"{where}.kind: {kind!r} is not one of {KINDS}")
    listed = _need(data, "runs", list, where)
    if kind == "crossplay":
        try:
            listed = expand_runs(
                listed,
                _need(data, "population", str, where),
                _strings(data.get("sampled", []), f"{where}.sampled"),
                where,
            )
        except ValueError as err:
            raise SpecError(str(err)) from err
        bad = [c for c in _need(data, "columns", list, where) if c not in CROSSPLAY_COLUMNS]
        if bad:
            raise SpecError(f"{where}.columns: {bad} are not crossplay columns {CROSSPLAY_COLUMNS}")
    elif "population" in data or "sampled" in data:
        raise SpecError(f"{where}: 'population' and 'sampled' are for crossplay tables")
    runs = tuple(_run(r, f"{where}.runs[{i}]") for i, r in enumerate(listed))
    if not runs:
        raise SpecError(f"{where}.runs: a table needs at least one run")
    ids = [r.id for r in runs]
    if len(set(ids)) != len(ids):
        raise SpecError(f"{where}.runs: run ids must be unique, got {ids}")
    training = None
    if data.get("training") is not None:
        training = _training(data["training"], f"{where}.training")
    elif any(r.source for r in runs):
        raise SpecError(f"{where}.runs: a run reads 'from' a training, but the table has none")
    rows = _strings(_need(data, "rows", list, where), f"{where}.rows")
    bad = [r for r in rows if r not in ROW_FIELDS]
    if bad:
        raise SpecError(f"{where}.rows: {bad} are not row fields {ROW_FIELDS}")
    columns = tuple(
        c if kind == "crossplay" else _column(c, f"{where}.columns")
        for c in _need(data, "columns", list, where)
    )
    filt = data.get("where") or {}
    if not isinstance(filt, dict) or any(k not in ROW_FIELDS for k in filt):
        raise SpecError(f"{where}.where: expected a mapping of row fields {ROW_FIELDS}")
    figure = None
    if data.get("figure") is not None:
        f = _need(data, "figure", dict, where)
        figure = FigureSpec(
            metric=_column(f.get("metric"), f"{where}.figure.metric"),
            x=_need(f, "x", str, f"{where}.figure"),
            series=_need(f, "series", str, f"{where}.figure"),
            kind=f.get("kind", "bar"),
            where=dict(f.get("where") or {}),
        )
        bad_where = [k for k in figure.where if k not in rows]
        if bad_where:
            raise SpecError(f"{where}.figure.where: {bad_where} are not rows of the table {rows}")
        if figure.kind not in FIGURE_KINDS:
            raise SpecError(f"{where}.figure.kind: {figure.kind!r} is not one of {FIGURE_KINDS}")
        for axis in (figure.x, figure.series):
            if axis not in rows:
                raise SpecError(f"{where}.figure: {axis!r} is not one of the table's rows {rows}")
    name = _need(data, "name", str, where)
    if name != path.stem:
        raise SpecError(f"{where}.name: {name!r} must equal the file name {path.stem!r}")
    return TableSpec(
        name=name,
        title=_need(data, "title", str, where),
        caption=_need(data, "caption", str, where).strip(),
        kind=kind,
        runs=runs,
        rows=rows,
        columns=columns,
        where=dict(filt),
        figure=figure,
        published=str(data.get("published", "")).strip(),
        training=training,
    )


def load_table(name: str, tables_dir: Path = TABLES_DIR) -> TableSpec:
    """The table ``configs/paper/<name>.yaml``."""
    path = tables_dir / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in tables_dir.glob("*.yaml"))
        raise SpecError(f"no table {name!r}: {path} does not exist; tables are {known}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise SpecError(f"{path}: not valid YAML: {err}") from err
    return parse_table(data, path)


def check_shared_runs(tables_dir: Path = TABLES_DIR) -> None:
    """A run id in several tables is one run directory (and one set of bundles): SpecError unless
    every table names it and runs it the same way (label, overrides, short overrides, training
    source, determinism)."""
    seen: dict[str, tuple[str, RunSpec]] = {}
    for name in table_names("all", tables_dir):
        for run in load_table(name, tables_dir).runs:
            first, have = seen.setdefault(run.id, (name, run))
            if have != run:
                raise SpecError(
                    f"run {run.id!r} is in tables {first!r} and {name!r} with a different label, "
                    "overrides, short, from or deterministic: a shared run must be the same run"
                )


def table_names(choice: str, tables_dir: Path = TABLES_DIR) -> list[str]:
    """The tables ``table=<choice>`` means: one name, or every table file for ``all``."""
    if choice == "all":
        present = {p.stem for p in tables_dir.glob("*.yaml")}
        return [n for n in TABLE_NAMES if n in present] + sorted(present - set(TABLE_NAMES))
    return [choice]


def is_metric(column: str) -> bool:
    return column in BY_NAME
