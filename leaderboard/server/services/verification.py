"""Verifying a submission: claim it, replay its bundle, and record the verdict on the board.

:func:`verify_next` claims the oldest queued submission (``crud.claim_next``) and
:func:`verify_submission` verifies it: it reads the stored bundle with the bounded reader
(:func:`leaderboard.core.bundle.read_bundle`, under the settings' limits), checks it is the
bundle that was uploaded (its sha256), replays every episode (``mapper(check, ...)``:
:func:`leaderboard.core.verify.verify_bundle`) and records the verdict in one transaction
(``crud.record_verdict``), which puts a verified submission on the board:

- verified: the entry's summary is :func:`leaderboard.core.ranking.entry_summary` of the server's
  rows (:func:`server_rows`: the checked identity of each row with the metrics the server
  recomputed, never a submitted number), and the run episodes' trace hashes;
- rejected: a short reason (the bundle-level reasons, or ``N of M episodes failed
  verification: <first reason>``) and every episode's result. A rejected submission's bundle
  file is deleted unless a submission that is not rejected uses the same file.

A submission the server fails to verify (a bug) is rejected with an ``internal error: ...``
reason (:func:`internal_error`) and the whole error is logged. ``mapper`` is ``map`` to replay
in this process, or an :class:`~leaderboard.core.episode_pool.EpisodePool`'s ``map`` to replay
in worker processes under its limits; when that pool is closed (the server is stopping),
:class:`PoolClosed` propagates and the submission stays ``verifying``
(``crud.requeue_verifying`` queues it again at the next start).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from benchmark.tasks.spec import load_task
from leaderboard.core.bundle import Bundle, read_bundle
from leaderboard.core.episode_pool import CheckError, PoolClosed
from leaderboard.core.ranking import entry_summary
from leaderboard.core.verify import EpisodeCheck, Verdict, verify_bundle, verify_episode
from leaderboard.server import crud
from leaderboard.server.db.models import Submission
from leaderboard.server.db.session import begin_write
from leaderboard.server.settings import Settings

log = logging.getLogger(__name__)
# The row fields verification checked against the server's registry (verify._identity and
# _match); with the family from the registry and the recomputed metrics they are the server's row.
CHECKED_FIELDS = (
    "key",
    "baseline",
    "suite",
    "suite_version",
    "task",
    "split",
    "scene",
    "seed",
    "n_agents",
    "comm",
    "reference",
    "status",
    "trace_hash",
)

Check = Callable[..., EpisodeCheck]
Mapper = Callable[..., Any]


@dataclass(frozen=True)
class Outcome:
    """What to record for one submission (the arguments of ``crud.record_verdict``)."""

    ok: bool
    reason: str
    episodes: Sequence[EpisodeCheck] = ()
    summary: dict[str, Any] | None = None
    trace_hashes: Collection[str] = field(default_factory=frozenset)


def server_rows(rows: Sequence[Mapping[str, Any]], checks: Sequence[EpisodeCheck]) -> list[dict]:
    """One row per checked episode, as the server knows it: the fields verification compared
    with the server's own (:data:`CHECKED_FIELDS`), the task's family from the registry and
    the recomputed metrics. Nothing else of a submitted row is kept."""
    by_key = {r["key"]: r for r in rows}
    out = []
    for check in checks:
        row = by_key[check.key]
        out.append(
            {
                **{name: row[name] for name in CHECKED_FIELDS},
                "family": load_task(row["task"]).family,
                **check.metrics,
            }
        )
    return out


def rejection_reason(verdict: Verdict) -> str:
    """The short reason of a rejected verdict: its bundle-level reasons, else how many
    episodes failed and the first failure."""
    if verdict.reasons:
        return "; ".join(verdict.reasons)
    failed = [c for c in verdict.episodes if not c.ok]
    first = f"{failed[0].key}: {'; '.join(failed[0].reasons)}" if failed else "no episode"
    return f"{len(failed)} of {len(verdict.episodes)} episodes failed verification: {first}"


def outcome_of(verdict: Verdict, bundle: Bundle) -> Outcome:
    """What to record for ``verdict`` of ``bundle``."""
    if not verdict.ok:
        return Outcome(False, rejection_reason(verdict), verdict.episodes)
    summary = entry_summary(server_rows(bundle.rows, verdict.episodes), bundle.traces)
    return Outcome(True, "", verdict.episodes, summary, verdict.trace_hashes)


def internal_error(err: BaseException) -> Outcome:
    """The rejection of a submission the server failed to verify."""
    # The reason is public: other errors may quote the server's paths, so only their type is
    # shown (the dispatcher logs the whole error).
    text = str(err) if isinstance(err, CheckError) else f"{type(err).__name__} (see the server log)"
    return Outcome(False, f"internal error: {text[:500]}")


def release_bundle(session: Session, data_dir: Path, bundle_path: str) -> bool:
    """Delete the bundle file ``bundle_path`` (relative to ``data_dir``) unless a submission
    that is not rejected uses it; returns whether it was deleted. The check and the deletion
    hold the database's write lock (SQLite), so no submission is stored meanwhile."""
    begin_write(session)
    users = session.scalar(
        select(func.count(Submission.id)).where(
            Submission.bundle_path == bundle_path, Submission.state != "rejected"
        )
    )
    deleted = False
    if not users:
        path = data_dir / bundle_path
        deleted = path.exists()
        path.unlink(missing_ok=True)
    session.commit()
    return deleted


def _verify(
    settings: Settings,
    sessions: sessionmaker[Session],
    submission_id: int,
    mapper: Mapper,
    check: Check,
) -> Outcome:
    """Read the stored bundle of the ``verifying`` submission ``submission_id`` with the
    bounded reader, check it is the one uploaded, and replay it; returns what to record."""
    with sessions() as session:
        submission = crud.get_submission(session, submission_id)
        if submission is None or submission.state != "verifying":
            state = "unknown" if submission is None else submission.state
            raise ValueError(f"submission {submission_id} is {state}, not verifying")
        challenge = crud.as_challenge(submission.challenge) if submission.challenge_id else None
        bundle_path, sha256 = submission.bundle_path, submission.bundle_sha256
    # No transaction stays open during the replays.
    with (settings.data_dir / bundle_path).open("rb") as stream:
        bundle = read_bundle(stream, settings.bundle_limits)
    if bundle.sha256 != sha256:
        raise ValueError(
            f"the stored bundle {bundle_path} has sha256 {bundle.sha256}, not the uploaded {sha256}"
        )
    return outcome_of(verify_bundle(bundle, challenge, check=check, mapper=mapper), bundle)


def _record(
    sessions: sessionmaker[Session], submission_id: int, outcome: Outcome
) -> tuple[str, str]:
    """Record ``outcome``; returns the submission's bundle path and the state recorded (a
    verified outcome is recorded as rejected when its traces turn out to be copied from
    another team's entry: ``crud.record_verdict``)."""
    with sessions() as session:
        submission = crud.record_verdict(
            session,
            submission_id,
            ok=outcome.ok,
            reason=outcome.reason,
            episodes=outcome.episodes,
            summary=outcome.summary,
            trace_hashes=outcome.trace_hashes,
        )
        return submission.bundle_path, submission.state


def verify_submission(
    settings: Settings,
    sessions: sessionmaker[Session],
    submission_id: int,
    mapper: Mapper = map,
    check: Check = verify_episode,
) -> str:
    """Verify the ``verifying`` submission ``submission_id`` (its episodes checked by
    ``mapper(check, ...)``) and record the verdict; returns the state recorded. A failure of
    the server's own is recorded as an ``internal error`` rejection; PoolClosed (the server is
    stopping) propagates with nothing recorded."""
    try:
        outcome = _verify(settings, sessions, submission_id, mapper, check)
    except PoolClosed:
        raise
    except Exception as err:
        log.exception("submission %d: the server failed to verify it", submission_id)
        if isinstance(err, CheckError):
            log.error("the worker's traceback:\n%s", err.worker_traceback)
        outcome = internal_error(err)
    try:
        bundle_path, state = _record(sessions, submission_id, outcome)
    except Exception as err:
        if not outcome.ok:
            raise
        # The verified outcome could not be stored (its summary, say): reject it as ours.
        log.exception("submission %d: its verdict could not be recorded", submission_id)
        outcome = internal_error(err)
        bundle_path, state = _record(sessions, submission_id, outcome)
    if state == "rejected":
        with sessions() as session:
            release_bundle(session, settings.data_dir, bundle_path)
    log.info("submission %d %s %s", submission_id, state, outcome.reason)
    return state


def verify_next(
    settings: Settings,
    sessions: sessionmaker[Session],
    mapper: Mapper = map,
    check: Check = verify_episode,
) -> int | None:
    """Claim the oldest queued submission and :func:`verify_submission` it; returns its id,
    or None when the queue is empty."""
    with sessions() as session:
        submission = crud.claim_next(session)
        if submission is None:
            return None
        submission_id = submission.id
    verify_submission(settings, sessions, submission_id, mapper, check)
    return submission_id
