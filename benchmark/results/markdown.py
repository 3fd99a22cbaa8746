"""A markdown table's lines, the one shape every written table of the benchmark uses (run
summaries, cross-play, members, comparisons, the paper tables, training reports)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The header line, its separator and one line per row of cells (already formatted)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cells in rows:
        if len(cells) != len(head):
            raise ValueError(f"a row of {len(cells)} cells under {len(head)} columns: {cells}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines
