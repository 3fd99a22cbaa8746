"""Alembic migrations of the leaderboard's schema, run by
:func:`leaderboard.db.session.upgrade`."""
