"""An index on episode_results.trace_hash: a verdict looks up which entries hold its traces.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_episode_results_trace_hash", "episode_results", ["trace_hash"])


def downgrade() -> None:
    op.drop_index("ix_episode_results_trace_hash", table_name="episode_results")
