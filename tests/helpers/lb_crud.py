"""Rows for the leaderboard's database tests: uploads, verdicts and challenges built the way the
server builds them, and threads started together to race each other."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from benchmark.results.challenge import Challenge, ChallengeEpisode
from leaderboard.server import crud

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TRACK = "smoke-v1.n2.comm-on.partial.skill"
TEST_TRACK = "test-v1.n2.comm-on.partial.skill"


@dataclass(frozen=True)
class Check:
    """One episode's verification outcome (the shape of leaderboard.core.verify.EpisodeCheck)."""

    key: str
    ok: bool = True
    reasons: tuple[str, ...] = ()
    metrics: dict[str, Any] = field(default_factory=lambda: {"SR": 1.0, "L": 12})
    trace_hash: str = "h0"


def upload(
    track: str = TRACK, challenge_id: str | None = None, sha256: str | None = None, **fields: Any
) -> crud.Upload:
    """An upload of ``track`` (its bundle's sha256 ``sha256``, a bundle of its own when None)
    with submission fields ``fields`` (method ``oracle`` unless given)."""
    sha256 = sha256 or secrets.token_hex(32)
    suite, version = track.split(".")[0].rsplit("-", 1)
    return crud.Upload(
        track=track,
        suite=suite,
        suite_version=version,
        bundle_path=f"/bundles/{len(fields)}.tar.gz",
        bundle_sha256=sha256,
        fields={"method": "oracle", **fields},
        challenge_id=challenge_id,
    )


def submit(session: Session, team_id: int, stored: crud.Upload | None = None, **kw: Any) -> int:
    """Store ``stored`` (default: :func:`upload`) for ``team_id`` (3 test submissions a day);
    its id."""
    return crud.store_submission(session, team_id, stored or upload(), daily_limit=3, **kw).id


def count(session: Session, model: type) -> int:
    """Rows of ``model``'s table."""
    return session.scalar(select(func.count()).select_from(model))


def verified(session: Session, submission_id: int, hashes: tuple[str, ...], **kw: Any) -> None:
    """Record the verdict of a submission whose run episodes all verified, with trace hashes
    ``hashes`` (one episode ``k<i>`` per hash)."""
    crud.record_verdict(
        session,
        submission_id,
        ok=True,
        reason="",
        episodes=[Check(f"k{i}", trace_hash=h) for i, h in enumerate(hashes)],
        summary={"families": {"all": {"SR": {"mean": 1.0, "lo": 0.5, "hi": 1.0}}}},
        trace_hashes=hashes,
        **kw,
    )


def challenge(
    team: str,
    cid: str = "ch-1",
    expires: datetime = T0 + timedelta(days=3),
    suite_version: str = "v1",
) -> Challenge:
    """A challenge of the hidden-seed ``test`` suite with one episode."""
    return Challenge(
        id=cid,
        suite="test",
        suite_version=suite_version,
        team=team,
        expires=expires.isoformat(),
        episodes=(ChallengeEpisode("prepare_toast_v0", "FloorPlan26", 1234567, 2),),
    )


def in_threads(work: Callable[[int], Any], n: int) -> list[Any]:
    """Run ``work(i)`` in ``n`` threads started together; their results (or exceptions)."""
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = work(i)
        except Exception as err:  # returned to the test, which asserts on it
            out[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out
