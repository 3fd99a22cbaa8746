"""Alembic's environment: migrations run on the connection that
:func:`leaderboard.server.db.session.upgrade` (or
:func:`~leaderboard.server.db.session.alembic_config`)
passes in, inside its transaction."""

from __future__ import annotations

from alembic import context

from leaderboard.server.db.models import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "leaderboard migrations run on a connection: use "
        "leaderboard.server.db.session.upgrade(engine)"
    )
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    # SQLite alters tables by copying them; later revisions use op.batch_alter_table.
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
