"""The initial schema: teams, tokens, challenges, submissions, episode results, entries.

Revision ID: 0001
Revises:
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Timestamps are UTC; leaderboard.server.db.models.UTCDateTime keeps them aware on SQLite too.
STAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_teams"),
        sa.UniqueConstraint("name", name="uq_teams_name"),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("revoked_at", STAMP, nullable=True),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], name="fk_tokens_team_id_teams"),
        sa.PrimaryKeyConstraint("id", name="pk_tokens"),
        sa.UniqueConstraint("sha256", name="uq_tokens_sha256"),
    )
    op.create_index("ix_tokens_team_id", "tokens", ["team_id"])
    op.create_table(
        "challenges",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("suite", sa.String(length=64), nullable=False),
        sa.Column("suite_version", sa.String(length=32), nullable=False),
        sa.Column("issued_at", STAMP, nullable=False),
        sa.Column("expires_at", STAMP, nullable=False),
        sa.Column("episodes", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], name="fk_challenges_team_id_teams"),
        sa.PrimaryKeyConstraint("id", name="pk_challenges"),
    )
    op.create_index("ix_challenges_team_id", "challenges", ["team_id"])
    op.create_table(
        "submissions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("track", sa.String(length=200), nullable=False),
        sa.Column("suite", sa.String(length=64), nullable=False),
        sa.Column("suite_version", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("bundle_path", sa.String(length=1000), nullable=False),
        sa.Column("bundle_sha256", sa.String(length=64), nullable=False),
        sa.Column("challenge_id", sa.String(length=64), nullable=True),
        sa.Column("reproduction_of_id", sa.Integer(), nullable=True),
        sa.Column("method", sa.String(length=100), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("parameters", sa.BigInteger(), nullable=True),
        sa.Column("code_url", sa.String(length=500), nullable=True),
        sa.Column("paper_url", sa.String(length=500), nullable=True),
        sa.Column("llm_tokens", sa.BigInteger(), nullable=True),
        sa.Column("wall_time_s", sa.Double(), nullable=True),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("updated_at", STAMP, nullable=False),
        sa.CheckConstraint(
            "state IN ('queued', 'verifying', 'verified', 'rejected')", name="ck_submissions_state"
        ),
        sa.ForeignKeyConstraint(
            ["challenge_id"], ["challenges.id"], name="fk_submissions_challenge_id_challenges"
        ),
        sa.ForeignKeyConstraint(
            ["reproduction_of_id"],
            ["submissions.id"],
            name="fk_submissions_reproduction_of_id_submissions",
        ),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], name="fk_submissions_team_id_teams"),
        sa.PrimaryKeyConstraint("id", name="pk_submissions"),
        sa.UniqueConstraint("challenge_id", name="uq_submissions_challenge_id"),
    )
    op.create_index("ix_submissions_bundle_sha256", "submissions", ["bundle_sha256"])
    op.create_index("ix_submissions_reproduction_of_id", "submissions", ["reproduction_of_id"])
    op.create_index("ix_submissions_state", "submissions", ["state"])
    op.create_index("ix_submissions_team_id_created_at", "submissions", ["team_id", "created_at"])
    op.create_index("ix_submissions_track", "submissions", ["track"])
    op.create_table(
        "episode_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=500), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("trace_hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name="fk_episode_results_submission_id_submissions",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_episode_results"),
        sa.UniqueConstraint("submission_id", "key", name="uq_episode_results_submission_id_key"),
    )
    op.create_table(
        "entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("track", sa.String(length=200), nullable=False),
        sa.Column("suite_version", sa.String(length=32), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("traces_digest", sa.String(length=64), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["submission_id"], ["submissions.id"], name="fk_entries_submission_id_submissions"
        ),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], name="fk_entries_team_id_teams"),
        sa.PrimaryKeyConstraint("id", name="pk_entries"),
        sa.UniqueConstraint("submission_id", name="uq_entries_submission_id"),
        sa.UniqueConstraint("track", "traces_digest", name="uq_entries_track_traces_digest"),
    )
    op.create_index("ix_entries_team_id", "entries", ["team_id"])
    op.create_index("ix_entries_track", "entries", ["track"])


def downgrade() -> None:
    for table in ("entries", "episode_results", "submissions", "challenges", "tokens", "teams"):
        op.drop_table(table)
