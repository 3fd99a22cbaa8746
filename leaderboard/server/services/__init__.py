"""The server's services: what the leaderboard does, apart from how it is asked.

``uploads`` checks an uploaded bundle, keeps it and queues its submission; ``verification``
claims a queued submission, replays its bundle and records the verdict on the board;
``challenges`` draws and keeps a team's challenge. Each takes what it needs as arguments (the
settings, a session or a sessionmaker) and knows nothing of HTTP (an import contract): a
refusal is a :class:`leaderboard.core.archive.BundleError` or a
:class:`leaderboard.server.crud.Refused`, whose status the app answers with. The routes of
``api/`` and the worker loop of ``worker`` call them.
"""
