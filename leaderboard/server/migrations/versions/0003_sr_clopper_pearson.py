"""Stored entry summaries take each metric's declared interval: SR's Clopper-Pearson bounds in
place of the Wilson bounds the board used to compute, and no bounds on a Student-t cell of one
value (its zero-width ``[x, x]`` said nothing).

The SR cells hold ``successes`` and ``n``, so their bounds are recomputed exactly; every other
cell keeps its mean, bounds and ``n`` unless ``n`` is below 2. A summary's ``intervals`` becomes
the per-metric map the board writes now. The schema does not change. The downgrade keeps the
recomputed bounds (they are what its labels then say) and gives ``intervals`` back the shape
the code of 0002 reads: ``{"SR": ..., "other": ...}``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from benchmark.metrics.stats import clopper_pearson

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

CLOPPER_PEARSON = "Clopper-Pearson 95%"
STUDENT_T = "Student-t 95%"
ENTRIES = sa.table("entries", sa.column("id", sa.Integer()), sa.column("summary", sa.JSON()))
# Read whole before the first update: SQLite's cursor may not stay open across writes.
_SUMMARIES = sa.select(ENTRIES.c.id, ENTRIES.c.summary).order_by(ENTRIES.c.id)


def _cells(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with SR's bounds recomputed and one-value Student-t cells unbounded."""
    families = {}
    for family, cells in summary["families"].items():
        out = dict(cells)
        for name, cell in cells.items():
            if not isinstance(cell, dict):
                continue  # the episode count and the run-level metrics
            if name == "SR":
                lo, hi = clopper_pearson(cell["successes"], cell["n"])
                out[name] = {**cell, "lo": lo, "hi": hi}
            elif cell.get("n", 0) < 2:
                out[name] = {**cell, "lo": None, "hi": None}
        families[family] = out
    metrics = [n for n, c in summary["families"]["all"].items() if isinstance(c, dict)]
    intervals = {n: CLOPPER_PEARSON if n == "SR" else STUDENT_T for n in metrics}
    return {**summary, "intervals": intervals, "families": families}


def upgrade() -> None:
    connection = op.get_bind()
    for entry_id, summary in connection.execute(_SUMMARIES).all():
        connection.execute(
            ENTRIES.update().where(ENTRIES.c.id == entry_id).values(summary=_cells(summary))
        )


def downgrade() -> None:
    connection = op.get_bind()
    intervals = {"SR": CLOPPER_PEARSON, "other": STUDENT_T}
    for entry_id, summary in connection.execute(_SUMMARIES).all():
        connection.execute(
            ENTRIES.update()
            .where(ENTRIES.c.id == entry_id)
            .values(summary={**summary, "intervals": intervals})
        )
