"""A table's records written out: ``<name>.md``, ``<name>.csv``, ``<name>.tex`` and ``<name>.png``.

The CSV is the table's exact content (mean, lo and hi of every column, rounded to
``DIGITS`` decimals so that the same computation gives the same file on any machine); the
reference check reads it back (:func:`read_csv`). The markdown and LaTeX show each cell as
``mean [lo, hi]``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from benchmark.reproduce.build import Record
from benchmark.reproduce.spec import TableSpec
from benchmark.results.markdown import markdown_table

DIGITS = 9
PARTS = ("mean", "lo", "hi")


def _number(x: float) -> str:
    return f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def show(cell: Any) -> str:
    """A cell as text: ``mean [lo, hi]``, ``mean`` without an interval, ``-`` when empty."""
    if not isinstance(cell, dict):
        return str(cell)
    mean = cell.get("mean")
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "-"
    if cell.get("lo") is None or cell.get("hi") is None:
        return _number(mean)
    return f"{_number(mean)} [{_number(cell['lo'])}, {_number(cell['hi'])}]"


def heading(spec: TableSpec) -> list[str]:
    return [*spec.rows, "episodes", "errors", *spec.columns]


def markdown(spec: TableSpec, records: list[Record]) -> str:
    head = heading(spec)
    lines = [
        f"# {spec.title}",
        "",
        *markdown_table(head, [[show(r[h]) for h in head] for r in records]),
    ]
    lines += ["", spec.caption]
    if spec.published:
        lines += ["", spec.published]
    return "\n".join(lines) + "\n"


def _exact(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(round(value, DIGITS))
    return str(value)


def csv_header(spec: TableSpec) -> list[str]:
    return [
        *spec.rows,
        "episodes",
        "errors",
        *(f"{c}_{p}" for c in spec.columns for p in PARTS),
    ]


def csv_rows(spec: TableSpec, records: list[Record]) -> list[list[str]]:
    out = []
    for r in records:
        cells = [str(r[f]) for f in spec.rows] + [str(r["episodes"]), str(r["errors"])]
        cells += [_exact(r[c].get(p)) for c in spec.columns for p in PARTS]
        out.append(cells)
    return out


def write_csv(path: Path, spec: TableSpec, records: list[Record]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(csv_header(spec))
        writer.writerows(csv_rows(spec, records))


def read_csv(path: Path) -> list[dict[str, str]]:
    """A table CSV's rows as {header: text}."""
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


_TEX = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}"}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)


def _tex_cell(cell: Any) -> str:
    if not isinstance(cell, dict):
        return _tex(str(cell))
    shown = show(cell)
    if "[" not in shown:
        return shown
    mean, interval = shown.split(" ", 1)
    return rf"{mean} {{\scriptsize {interval}}}"


def latex(spec: TableSpec, records: list[Record]) -> str:
    head = heading(spec)
    align = "l" * len(spec.rows) + "r" * (len(head) - len(spec.rows))
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{_tex(spec.title)}. {_tex(spec.caption)}}}",
        rf"\label{{tab:{spec.name}}}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(_tex(h) for h in head) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(_tex_cell(r[h]) for h in head) + r" \\" for r in records]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def series_colour(spec: TableSpec, name: Any, position: int) -> str:
    """A series' colour: the run's place in the table when the series is a run's label (so a
    run keeps its colour in every figure of the table, its learning curve included), else the
    series' own place."""
    labels = [r.label for r in spec.runs]
    return f"C{labels.index(str(name)) if str(name) in labels else position}"


def x_order(values: Any) -> list[Any]:
    """A figure's x values, each once: in numeric order when all are integers (agent counts,
    levels), else in the order the records give."""
    xs = list(dict.fromkeys(values))
    if all(str(x).lstrip("-").isdigit() for x in xs):
        xs.sort(key=lambda x: int(str(x)))
    return xs


def outside_legend(ax: Any, **kwargs: Any) -> None:
    """The legend right of the axes, where it cannot hide a bar or a curve."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **kwargs)


def figure(path: Path, spec: TableSpec, records: list[Record]) -> bool:
    """The table's figure as PNG; False when the table declares none."""
    fig_spec = spec.figure
    if fig_spec is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [r for r in records if all(str(r[k]) == str(v) for k, v in fig_spec.where.items())]
    series: dict[str, list[Record]] = {}
    for r in records:
        series.setdefault(r[fig_spec.series], []).append(r)
    xs = x_order(r[fig_spec.x] for r in records)
    per_x = max(1, len(series)) / 2 if fig_spec.kind == "bar" else 1.0
    # Room for the bars or points (at most 12 inches: a wide table's bars get thinner) and, right
    # of them, the legend.
    fig, ax = plt.subplots(figsize=(min(12.0, max(6.0, 0.9 * len(xs) * per_x)) + 2.0, 3.6))
    width = 0.8 / max(1, len(series))
    for i, (name, members) in enumerate(series.items()):
        colour = series_colour(spec, name, i) if fig_spec.series == "baseline" else f"C{i}"
        at = {r[fig_spec.x]: r[fig_spec.metric] for r in members}
        pos, mean, err_lo, err_hi = [], [], [], []
        for j, x in enumerate(xs):
            cell = at.get(x)
            if not cell or cell.get("mean") is None:
                continue
            lo = cell["lo"] if cell.get("lo") is not None else cell["mean"]
            hi = cell["hi"] if cell.get("hi") is not None else cell["mean"]
            pos.append(j + (i - (len(series) - 1) / 2) * width if fig_spec.kind == "bar" else j)
            mean.append(cell["mean"])
            err_lo.append(max(0.0, cell["mean"] - lo))
            err_hi.append(max(0.0, hi - cell["mean"]))
        if not pos:  # no value anywhere (e.g. no speedup without a 1-agent reference)
            continue
        style = {"yerr": [err_lo, err_hi], "label": str(name), "color": colour}
        if fig_spec.kind == "bar":
            ax.bar(pos, mean, width, capsize=2, **style)
        else:
            ax.errorbar(pos, mean, capsize=3, marker="o", **style)
    ax.set_xticks(range(len(xs)), [str(x) for x in xs], fontsize=8)
    ax.set_xlabel(fig_spec.x)
    ax.set_ylabel(f"{fig_spec.metric} (95% interval)")
    ax.set_title(spec.title)
    outside_legend(ax, title=fig_spec.series, title_fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_table(out_dir: Path, spec: TableSpec, records: list[Record]) -> list[Path]:
    """Every file of the table under ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{spec.name}.{ext}" for ext in ("md", "csv", "tex")]
    paths[0].write_text(markdown(spec, records))
    write_csv(paths[1], spec, records)
    paths[2].write_text(latex(spec, records))
    png = out_dir / f"{spec.name}.png"
    if figure(png, spec, records):
        paths.append(png)
    return paths
