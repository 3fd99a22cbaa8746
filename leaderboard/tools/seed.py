"""``python -m leaderboard.tools.seed [key=value ...]``: a local board with the reference baselines.

Starts the server (the options are those of ``python -m leaderboard.server.serve``; ``--help`` lists
them), creates the team ``collab-bench reference`` when it is missing, submits the committed
reference bundles (``leaderboard/data/paper/*.tar.gz``: the runs behind the paper's committed
tables, see ``python -m leaderboard.tools.paper``) through the HTTP API like any team would, waits
for their verdicts, prints the board's URL, and keeps serving until interrupted. Bundles the
team already submitted are not submitted again, so restarting on the same data directory is
quiet. ``bundles=DIR`` seeds the bundles of another directory instead (a subset, say).
"""

from __future__ import annotations

import sys
import threading
import time
from hashlib import sha256
from pathlib import Path

import httpx
import uvicorn
from sqlalchemy import select

from leaderboard.core.bundle import read_bundle, stored_form
from leaderboard.server import auth, crud
from leaderboard.server.app import create_app
from leaderboard.server.db.models import Submission
from leaderboard.server.db.session import open_database
from leaderboard.server.settings import Settings, settings_from_cli

PROG = "python -m leaderboard.tools.seed"
TEAM = "collab-bench reference"
BUNDLES_DIR = Path(__file__).resolve().parents[1] / "data"
PAPER_DIR = BUNDLES_DIR / "paper"  # the paper tables' runs: what the board is seeded with
SMOKE_DIR = BUNDLES_DIR / "smoke"  # four small smoke-suite bundles: fixtures of tests and bench
VERDICT_TIMEOUT_S = 600.0


def reference_bundles() -> list[Path]:
    """The committed reference bundles (the paper tables' runs), by name."""
    return sorted(PAPER_DIR.glob("*.tar.gz"))


def smoke_bundles() -> list[Path]:
    """The four small smoke-suite bundles (oracle, heuristic, random, llm_planner), by name."""
    return sorted(SMOKE_DIR.glob("*.tar.gz"))


def _token_and_pending(settings: Settings, bundles: list[Path]) -> tuple[str, list[Path]]:
    """A fresh token of the reference team (created when missing) and the bundles it has not
    submitted yet."""
    sessions = open_database(settings.database_url)
    try:
        with sessions() as session:
            team = crud.team_by_name(session, TEAM) or crud.create_team(session, TEAM)
            # The token lives as long as this seeding: the previous one is revoked.
            crud.revoke_tokens(session, team.id)
            token = auth.issue_token(session, team.id)
            done = set(
                session.scalars(
                    select(Submission.bundle_sha256).where(
                        Submission.team_id == team.id, Submission.state != "rejected"
                    )
                )
            )
    finally:
        sessions.kw["bind"].dispose()
    pending = [p for p in bundles if _stored_sha256(p) not in done]
    return token, pending


def _stored_sha256(path: Path) -> str:
    """The sha256 of what the server keeps of the bundle at ``path`` (its stored form)."""
    with path.open("rb") as stream:
        return sha256(stored_form(read_bundle(stream))).hexdigest()


def submit_all(url: str, token: str, bundles: list[Path]) -> list[str]:
    """Upload ``bundles`` and wait for every verdict; one line per bundle."""
    lines = []
    with httpx.Client(base_url=url, timeout=60) as client:
        ids = {}
        for path in bundles:
            response = client.post(
                "/api/submissions",
                headers={"Authorization": f"Bearer {token}"},
                files={"file": (path.name, path.read_bytes(), "application/gzip")},
            )
            if response.status_code != 202:
                lines.append(f"{path.name}: refused ({response.status_code}): {response.text}")
                continue
            ids[path.name] = response.json()["id"]
        deadline = time.monotonic() + VERDICT_TIMEOUT_S
        for name, submission in ids.items():
            while True:
                state = client.get(f"/api/submissions/{submission}").json()
                if state["state"] in ("verified", "rejected") or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            where = f"track {state['track']}, rank {state['rank']}" if state["rank"] else ""
            lines.append(f"{name}: {state['state']} {where} {state['reason']}".rstrip())
    return lines


def _bundles_option(args: list[str]) -> tuple[list[Path], list[str]]:
    """The bundles ``bundles=DIR`` names (default: the committed reference bundles), and the
    other arguments (the server's options)."""
    chosen = [a for a in args if a.startswith("bundles=")]
    rest = [a for a in args if not a.startswith("bundles=")]
    if not chosen:
        return reference_bundles(), rest
    folder = Path(chosen[-1].split("=", 1)[1])
    bundles = sorted(folder.glob("*.tar.gz"))
    if not bundles:
        raise SystemExit(f"{PROG}: bundles={folder}: no *.tar.gz bundle there")
    return bundles, rest


def main(argv: list[str] | None = None) -> int:
    bundles, args = _bundles_option(sys.argv[1:] if argv is None else list(argv))
    settings = settings_from_cli(args, PROG)
    token, pending = _token_and_pending(settings, bundles)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings), host=settings.host, port=settings.port, log_level="warning"
        )
    )
    url = f"http://{settings.host}:{settings.port}"

    def seed() -> None:
        while not server.started:
            if server.should_exit:
                return
            time.sleep(0.05)
        for line in submit_all(url, token, pending):
            print(f"  {line}", flush=True)
        print(f"leaderboard: {url}/ (reference baselines; Ctrl-C stops)")

    print(f"seeding the board in {settings.data_dir} with {len(pending)} reference bundle(s) ...")
    threading.Thread(target=seed, daemon=True).start()
    server.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
