"""``python -m leaderboard.server.serve [key=value ...]``: run the leaderboard server.

    python -m leaderboard.server.serve host=127.0.0.1 port=8080 data_dir=leaderboard_data
    python -m leaderboard.server.serve db_url=postgresql+psycopg://user@127.0.0.1:5432/board

``--help`` lists every option with its default. The server migrates the database to the newest
schema, requeues submissions a previous server left half-verified, and verifies uploads in a
pool of ``workers`` processes.
"""

from __future__ import annotations

import sys

import uvicorn

from leaderboard.server.app import create_app
from leaderboard.server.settings import settings_from_cli

PROG = "python -m leaderboard.server.serve"


def main(argv: list[str] | None = None) -> None:
    settings = settings_from_cli(sys.argv[1:] if argv is None else argv, PROG)
    print(f"leaderboard: http://{settings.host}:{settings.port}/ (data in {settings.data_dir})")
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        # Uploads wait in the worker pool's queue, not in the socket's backlog.
        backlog=2048,
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":
    main()
