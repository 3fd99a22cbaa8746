"""Alembic migrations of the leaderboard's schema, run by
:func:`leaderboard.server.db.session.upgrade`."""
