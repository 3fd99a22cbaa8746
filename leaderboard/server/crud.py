"""Plain functions over the leaderboard's tables; the routes, the workers and the admin CLI call
them. Each function that writes runs in its own write transaction
(:func:`leaderboard.server.db.session.begin_write`, which first commits what the session holds open)
and commits it, so nobody ever sees half of it.

Refusals a client can cause (a taken team name, a foreign, expired or reused challenge, a rate
limit, another team's traces) raise :class:`Refused` carrying the HTTP status that says why.

Limits hold under concurrent requests: a check and the insert it guards are one write
transaction that holds the team's row (``SELECT ... FOR UPDATE`` on PostgreSQL; on SQLite the
write transaction holds the database's write lock from its start), so two requests of one team
are counted one after the other. Verdicts of a track are written one at a time in the same way
(a transaction-scoped advisory lock of the track on PostgreSQL), so the entries a verdict compares
its traces with are every entry written before it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import Select, func, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from benchmark.results.challenge import Challenge, ChallengeEpisode, Partner
from benchmark.results.suite import suites
from leaderboard.core.tracks import Track
from leaderboard.core.untrusted import invisible_character
from leaderboard.server.db import models
from leaderboard.server.db.models import (
    TEAM_NAME_MAX,
    Entry,
    EpisodeResult,
    Submission,
    Team,
    Token,
)
from leaderboard.server.db.session import begin_write

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
# Prefix of the PostgreSQL advisory lock keys that serialise the verdicts of one track.
VERDICT_LOCK = "leaderboard verdicts of track "
COPIES_NAMED = 3  # entries a plagiarism refusal names (the rest are counted)
# The submission.yaml fields kept with a submission, and the ones it must have.
SUBMISSION_FIELDS = (
    "method",
    "description",
    "model",
    "parameters",
    "code_url",
    "paper_url",
    "llm_tokens",
    "wall_time_s",
)


class Refused(ValueError):
    """A request the leaderboard's rules refuse; ``status`` is the HTTP status saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AlreadyUploaded(Exception):
    """The team's earlier submission of the same bundle (``submission``) answers an upload."""

    def __init__(self, submission: Submission) -> None:
        super().__init__(f"the same bundle is submission {submission.id}")
        self.submission = submission


class EpisodeOutcome(Protocol):
    """What a verdict says about one episode (``leaderboard.core.verify.EpisodeCheck``)."""

    key: str
    ok: bool
    reasons: tuple[str, ...]
    metrics: dict[str, Any]
    trace_hash: str


def utcnow() -> datetime:
    return datetime.now(UTC)


# --- teams and tokens -------------------------------------------------------------------------


def check_team_name(name: str) -> str:
    """``name`` unchanged if it can be a team name: not blank, at most TEAM_NAME_MAX
    characters, no control and no Unicode format characters (bidi overrides, zero-width
    spaces: they can make one name render as another); the pages escape everything else."""
    if not name.strip():
        raise Refused(422, "team name: must not be empty")
    if len(name) > TEAM_NAME_MAX:
        raise Refused(422, f"team name: {len(name)} characters, at most {TEAM_NAME_MAX}")
    hidden = invisible_character(name)
    if hidden is not None:
        raise Refused(
            422, f"team name: must not hold control or format characters; it holds {hidden}"
        )
    return name


def create_team(session: Session, name: str, now: datetime | None = None) -> Team:
    """A new team; a taken name is refused (409)."""
    begin_write(session)
    team = Team(name=check_team_name(name), created_at=now or utcnow())
    session.add(team)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise Refused(409, f"team name {name!r} is taken") from None
    return team


def team_by_name(session: Session, name: str) -> Team | None:
    return session.scalars(select(Team).where(Team.name == name)).one_or_none()


def list_teams(session: Session) -> list[Team]:
    """Every team with its tokens, oldest first."""
    return list(session.scalars(select(Team).options(selectinload(Team.tokens)).order_by(Team.id)))


def add_token(session: Session, team_id: int, sha256: str, now: datetime | None = None) -> Token:
    """Store a token of ``team_id`` by its sha256 (the token itself is never stored)."""
    begin_write(session)
    token = Token(team_id=team_id, sha256=sha256, created_at=now or utcnow())
    session.add(token)
    session.commit()
    return token


def revoke_tokens(session: Session, team_id: int, now: datetime | None = None) -> int:
    """Revoke every active token of ``team_id``; returns how many were active."""
    begin_write(session)
    result = session.execute(
        update(Token)
        .where(Token.team_id == team_id, Token.revoked_at.is_(None))
        .values(revoked_at=now or utcnow())
    )
    session.commit()
    return result.rowcount


def active_token(session: Session, sha256: str) -> Token | None:
    """The unrevoked token with this sha256, with its team."""
    return session.scalars(
        select(Token)
        .options(selectinload(Token.team))
        .where(Token.sha256 == sha256, Token.revoked_at.is_(None))
    ).one_or_none()


# --- challenges -------------------------------------------------------------------------------


def _lock_team(session: Session, team_id: int) -> None:
    """Hold ``team_id``'s row until the transaction ends (PostgreSQL; SQLite's write
    transaction already excludes every other writer)."""
    session.execute(select(Team.id).where(Team.id == team_id).with_for_update())


def _refuse_past(made: int, limit: int, what: str, window: str, per: str) -> None:
    if made >= limit:
        raise Refused(429, f"{made} {what} in the last {window}; the limit is {limit} {per}")


def check_challenge_rate(
    session: Session, team_id: int, limit: int, now: datetime | None = None
) -> None:
    """Refuse (429) a challenge to ``team_id`` when it drew ``limit`` in the 24 hours before
    ``now``."""
    made = challenges_since(session, team_id, (now or utcnow()) - DAY)
    _refuse_past(made, limit, "challenges", "24 hours", "a day")


def check_submission_rate(
    session: Session, team_id: int, limit: int, now: datetime | None = None
) -> None:
    """Refuse (429) an upload of ``team_id`` when it made ``limit`` submissions (any track,
    any state) in the hour before ``now``."""
    made = submissions_since(session, team_id, (now or utcnow()) - HOUR)
    _refuse_past(made, limit, "submissions", "hour", "an hour")


def store_challenge(
    session: Session,
    team_id: int,
    challenge: Challenge,
    issued_at: datetime,
    daily_limit: int | None = None,
) -> models.Challenge:
    """Keep an issued challenge (see :mod:`leaderboard.core.challenges`). With ``daily_limit`` it is
    refused (429) when the team drew that many in the 24 hours before ``issued_at``; the check
    and the insert are one transaction under a lock on the team's row, so concurrent requests
    never draw more than the limit. Draw the challenge first (that is slow) and store it
    here, so the transaction stays short."""
    begin_write(session)
    if daily_limit is not None:
        _lock_team(session, team_id)
        try:
            check_challenge_rate(session, team_id, daily_limit, issued_at)
        except Refused:
            session.rollback()
            raise
    row = models.Challenge(
        id=challenge.id,
        team_id=team_id,
        suite=challenge.suite,
        suite_version=challenge.suite_version,
        issued_at=issued_at,
        expires_at=datetime.fromisoformat(challenge.expires),
        episodes=[e.to_json() for e in challenge.episodes],
    )
    session.add(row)
    session.commit()
    return row


def as_challenge(row: models.Challenge) -> Challenge:
    """The stored challenge as the benchmark's record (what a run and the verifier read)."""
    return Challenge(
        id=row.id,
        suite=row.suite,
        suite_version=row.suite_version,
        team=row.team.name,
        expires=row.expires_at.isoformat(),
        episodes=tuple(
            ChallengeEpisode(
                e["task"],
                e["scene"],
                e["seed"],
                e["n_agents"],
                Partner.from_json(e["partner"]) if e.get("partner") else None,
            )
            for e in row.episodes
        ),
    )


def usable_challenge(
    session: Session,
    challenge_id: str,
    team_id: int,
    suite: str,
    suite_version: str,
    now: datetime | None = None,
) -> models.Challenge:
    """The challenge ``challenge_id`` if ``team_id`` may answer it now with a submission on
    ``suite``/``suite_version``: issued (else 422), to this team (403), not answered yet (409),
    not expired (403), for that suite (422).

    Any answer uses a challenge up, a rejected one too: once a team has run a challenge its
    seeds are known to it, so a second answer could be tuned to them, and the drawn challenge
    already counts as an attempt (:func:`attempts`). A team that sent a wrong answer draws a
    new challenge."""
    row = session.get(models.Challenge, challenge_id)
    if row is None:
        raise Refused(422, f"challenge {challenge_id!r} was never issued")
    if row.team_id != team_id:
        raise Refused(403, f"challenge {challenge_id!r} was issued to another team")
    if row.submission is not None:
        raise Refused(
            409,
            f"challenge {challenge_id!r} was already answered by submission "
            f"{row.submission.id} ({row.submission.state}); an answer uses a challenge up, "
            "rejected or not: request a new challenge",
        )
    if row.expires_at <= (now or utcnow()):
        raise Refused(403, f"challenge {challenge_id!r} expired at {row.expires_at.isoformat()}")
    if (row.suite, row.suite_version) != (suite, suite_version):
        raise Refused(
            422,
            f"challenge {challenge_id!r} is for suite {row.suite} {row.suite_version}, "
            f"the submission is for {suite} {suite_version}",
        )
    return row


def challenge_submissions_since(session: Session, team_id: int, since: datetime) -> int:
    """Submissions answering a challenge that ``team_id`` made after ``since``."""
    return session.scalar(
        select(func.count(Submission.id)).where(
            Submission.team_id == team_id,
            Submission.challenge_id.is_not(None),
            Submission.created_at > since,
        )
    )


def challenges_since(session: Session, team_id: int, since: datetime) -> int:
    """Challenges issued to ``team_id`` after ``since``."""
    return session.scalar(
        select(func.count(models.Challenge.id)).where(
            models.Challenge.team_id == team_id, models.Challenge.issued_at > since
        )
    )


def submissions_since(session: Session, team_id: int, since: datetime) -> int:
    """Submissions (any track, any state) that ``team_id`` made after ``since``."""
    return session.scalar(
        select(func.count(Submission.id)).where(
            Submission.team_id == team_id, Submission.created_at > since
        )
    )


# --- submissions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Upload:
    """A stored upload to record: its track, where the bundle is kept, and its
    ``submission.yaml`` (``fields``, keys of SUBMISSION_FIELDS; ``method`` required)."""

    track: str
    suite: str
    suite_version: str
    bundle_path: str
    bundle_sha256: str
    fields: Mapping[str, Any]
    challenge_id: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.fields) - set(SUBMISSION_FIELDS))
        if unknown:
            raise ValueError(f"fields: unknown submission.yaml field(s) {unknown}")
        if not self.fields.get("method"):
            raise ValueError("fields: 'method' is required")


def store_submission(
    session: Session,
    team_id: int,
    upload: Upload,
    daily_limit: int,
    hourly_limit: int | None = None,
    now: datetime | None = None,
) -> Submission:
    """Record an upload as ``queued``. It is refused (429) when the team made ``hourly_limit``
    submissions in the last hour (:func:`check_submission_rate`; None: no hourly limit), and a
    test submission (one answering a challenge) unless :func:`usable_challenge` allows it and
    the team made fewer than ``daily_limit`` test submissions in the last 24 hours (429).
    Checks and insert are one transaction, under a lock on the team's row, so concurrent
    uploads never pass a limit. When the team already has a submission of the same bundle
    that is not rejected (:func:`same_upload`: two identical uploads racing), nothing is
    stored and :class:`AlreadyUploaded` carries that submission."""
    begin_write(session)
    now = now or utcnow()
    _lock_team(session, team_id)
    existing = same_upload(session, team_id, upload.bundle_sha256)
    if existing is not None:
        session.rollback()
        raise AlreadyUploaded(existing)
    try:
        if hourly_limit is not None:
            check_submission_rate(session, team_id, hourly_limit, now)
        if upload.challenge_id is not None:
            usable_challenge(
                session, upload.challenge_id, team_id, upload.suite, upload.suite_version, now
            )
            used = challenge_submissions_since(session, team_id, now - DAY)
            _refuse_past(used, daily_limit, "test submissions", "24 hours", "a day")
    except Refused:
        session.rollback()
        raise
    fields = {name: upload.fields.get(name) for name in SUBMISSION_FIELDS}
    fields["description"] = fields["description"] or ""
    fields["model"] = fields["model"] or ""
    submission = Submission(
        team_id=team_id,
        track=upload.track,
        suite=upload.suite,
        suite_version=upload.suite_version,
        state="queued",
        reason="",
        bundle_path=upload.bundle_path,
        bundle_sha256=upload.bundle_sha256,
        challenge_id=upload.challenge_id,
        created_at=now,
        updated_at=now,
        **fields,
    )
    session.add(submission)
    try:
        session.commit()
    except IntegrityError:
        # Only the challenge can clash: another upload answered it between check and insert.
        session.rollback()
        raise Refused(409, f"challenge {upload.challenge_id!r} was already answered") from None
    return submission


def same_upload(session: Session, team_id: int, bundle_sha256: str) -> Submission | None:
    """``team_id``'s earliest submission of the bundle whose sha256 is ``bundle_sha256`` that
    was not rejected (queued, verifying or verified), or None: a byte-identical resubmission is
    answered with it and stores nothing."""
    return session.scalars(
        select(Submission)
        .where(
            Submission.team_id == team_id,
            Submission.bundle_sha256 == bundle_sha256,
            Submission.state != "rejected",
        )
        .order_by(Submission.id)
        .limit(1)
    ).one_or_none()


def get_submission(session: Session, submission_id: int) -> Submission | None:
    """A submission with its per-episode results, team and entry."""
    return session.scalars(
        select(Submission)
        .options(
            selectinload(Submission.episodes),
            selectinload(Submission.team),
            selectinload(Submission.entry),
        )
        .where(Submission.id == submission_id)
    ).one_or_none()


def claim_next(session: Session, now: datetime | None = None) -> Submission | None:
    """Move the oldest ``queued`` submission to ``verifying`` and return it (None when the
    queue is empty). Concurrent callers never claim the same one: PostgreSQL skips rows
    another transaction has locked (FOR UPDATE SKIP LOCKED); on SQLite the transaction holds
    the database's write lock from its start (``BEGIN IMMEDIATE``)."""
    begin_write(session)
    submission = session.scalars(
        select(Submission)
        .where(Submission.state == "queued")
        .order_by(Submission.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    ).one_or_none()
    if submission is None:
        session.commit()  # ends the transaction (and its lock) without expiring loaded objects
        return None
    submission.state = "verifying"
    submission.updated_at = now or utcnow()
    session.commit()
    return submission


def requeue_verifying(session: Session, now: datetime | None = None) -> int:
    """Move every ``verifying`` submission back to ``queued`` (at server start: their
    verification died with the previous process); returns how many."""
    begin_write(session)
    result = session.execute(
        update(Submission)
        .where(Submission.state == "verifying")
        .values(state="queued", updated_at=now or utcnow())
    )
    session.commit()
    return result.rowcount


def traces_digest(trace_hashes: Collection[str]) -> str:
    """One hash for a set of run-episode trace hashes (equal sets, equal digests)."""
    return hashlib.sha256("\n".join(sorted(trace_hashes)).encode()).hexdigest()


def record_verdict(
    session: Session,
    submission_id: int,
    *,
    ok: bool,
    reason: str,
    episodes: Sequence[EpisodeOutcome],
    summary: dict[str, Any] | None = None,
    trace_hashes: Collection[str] = (),
    now: datetime | None = None,
) -> Submission:
    """Write a verification's outcome in one transaction: the per-episode results, the state
    (``verified`` if ``ok``, else ``rejected`` with ``reason``) and, for a verified
    submission, its entry (with ``summary``), unless

    - an entry of the same track has the same run-episode traces (``trace_hashes``, the whole
      set): then the submission is verified and recorded as a reproduction of that entry's
      submission (by the entry's own team too, which :func:`reproductions` does not count);
    - some of its run-episode traces are those of another team's entry: then it is
      ``rejected`` with :func:`copied_from`'s reason naming the entry, and gets no entry.

    Verified verdicts of one track are written one at a time (see the module docstring), so
    two submissions racing with each other's traces never both get an entry. Only a
    ``verifying`` submission takes a verdict."""
    begin_write(session)
    now = now or utcnow()
    submission = session.scalars(
        select(Submission).where(Submission.id == submission_id).with_for_update()
    ).one_or_none()
    if submission is None or submission.state != "verifying":
        state = None if submission is None else submission.state
        session.rollback()
        raise ValueError(f"submission {submission_id} is {state or 'unknown'}, not verifying")
    if ok and (summary is None or not trace_hashes):
        session.rollback()
        raise ValueError("a verified submission needs its summary and trace hashes")
    session.add_all(
        EpisodeResult(
            submission_id=submission_id,
            key=e.key,
            ok=e.ok,
            reasons=list(e.reasons),
            metrics=dict(e.metrics),
            trace_hash=e.trace_hash,
        )
        for e in episodes
    )
    submission.state = "verified" if ok else "rejected"
    submission.reason = reason
    submission.updated_at = now
    if ok and summary is not None:
        _lock_track(session, submission.track)
        digest = traces_digest(trace_hashes)
        original = _entry_with_traces(session, submission.track, digest)
        if original is not None:
            submission.reproduction_of_id = original.submission_id
        elif (
            copied := _copies(session, submission.team_id, submission.track, trace_hashes)
        ) is not None:
            submission.state = "rejected"
            submission.reason = copied
        else:
            session.add(
                Entry(
                    submission_id=submission_id,
                    team_id=submission.team_id,
                    track=submission.track,
                    suite_version=submission.suite_version,
                    summary=summary,
                    traces_digest=digest,
                    created_at=now,
                )
            )
    session.commit()
    return submission


def _lock_track(session: Session, track: str) -> None:
    """Hold the track's verdict lock until the transaction ends (PostgreSQL: an advisory lock
    keyed by the track; SQLite's write transaction already excludes every other writer)."""
    if session.get_bind().dialect.name == "postgresql":
        digest = hashlib.sha256(f"{VERDICT_LOCK}{track}".encode()).digest()
        key = int.from_bytes(digest[:8], "big", signed=True)
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def _entry_with_traces(session: Session, track: str, digest: str) -> Entry | None:
    return session.scalars(
        select(Entry).where(Entry.track == track, Entry.traces_digest == digest)
    ).one_or_none()


def copied_from(
    session: Session, team_id: int, track: str, run_trace_hashes: Collection[str]
) -> str | None:
    """Why a submission of ``team_id`` on ``track`` whose run episodes have the trace hashes
    ``run_trace_hashes`` takes credit for another team's work, or None when it does not.

    It does when some of its traces are those of another team's entry on the track (the
    bundles on the board are public) without being that entry's whole set: a whole set is a
    reproduction of the entry, and a team's own entries are its own. The answer names the
    entries copied (id, team, how many of the submission's run episodes), most copied first,
    each trace counted once, for the earliest entry holding it; past COPIES_NAMED entries the
    rest are counted."""
    if _entry_with_traces(session, track, traces_digest(run_trace_hashes)) is not None:
        return None
    return _copies(session, team_id, track, run_trace_hashes)


def _copies(
    session: Session, team_id: int, track: str, run_trace_hashes: Collection[str]
) -> str | None:
    """:func:`copied_from` once the whole set is known not to be an entry's."""
    hashes = sorted(set(run_trace_hashes))
    holders = session.execute(
        select(EpisodeResult.trace_hash, Entry.id, Team.name)
        .join(Entry, Entry.submission_id == EpisodeResult.submission_id)
        .join(Team, Team.id == Entry.team_id)
        .where(
            Entry.track == track,
            Entry.team_id != team_id,
            EpisodeResult.trace_hash.in_(hashes),
        )
        .order_by(Entry.id)
    ).all()
    first: dict[str, tuple[int, str]] = {}  # each trace is credited to its earliest entry
    for trace, entry, name in holders:
        first.setdefault(trace, (entry, name))
    if not first:
        return None
    counted = Counter(first.values())
    copied = sorted(counted.items(), key=lambda item: (-item[1], item[0][0]))
    named = "; ".join(
        f"{count} of its {len(hashes)} run episodes are traces of entry {entry} by team {name!r}"
        for (entry, name), count in copied[:COPIES_NAMED]
    )
    more = len(copied) - COPIES_NAMED
    return (
        f"{named}{f'; and traces of {more} more entries' if more > 0 else ''}: a submission is "
        "credited only with its team's own traces (the whole set of an entry's traces is a "
        "reproduction of it)"
    )


# --- entries ----------------------------------------------------------------------------------


def track_entries(session: Session, track: str) -> list[Entry]:
    """The entries of one track, with their team and submission, oldest first."""
    return list(
        session.scalars(
            select(Entry)
            .options(selectinload(Entry.team), selectinload(Entry.submission))
            .where(Entry.track == track)
            .order_by(Entry.id)
        )
    )


def tracks(session: Session) -> list[tuple[str, int]]:
    """Every track with entries, and how many, by track key."""
    return [
        (track, count)
        for track, count in session.execute(
            select(Entry.track, func.count(Entry.id)).group_by(Entry.track).order_by(Entry.track)
        )
    ]


def attempts(session: Session, track: str) -> dict[int, int]:
    """The attempts per team on ``track``, by team id. On a track of a hidden-seed suite, the
    challenges the team drew for the track's suite and version, answered or not: a team that
    runs every challenge it draws and submits only its luckiest answer used them all (a
    challenge is bound to no track until it is answered, so it counts on each of the suite's
    tracks). On other tracks, the team's submissions to the track, in every state."""
    parsed = Track.from_key(track)
    suite = suites().get(parsed.suite)
    if suite is not None and suite.hidden:
        counted = (
            select(models.Challenge.team_id, func.count(models.Challenge.id))
            .where(
                models.Challenge.suite == parsed.suite,
                models.Challenge.suite_version == parsed.suite_version,
            )
            .group_by(models.Challenge.team_id)
        )
    else:
        counted = (
            select(Submission.team_id, func.count(Submission.id))
            .where(Submission.track == track)
            .group_by(Submission.team_id)
        )
    return {team_id: count for team_id, count in session.execute(counted)}


def _other_teams_reproductions(submission_ids: Collection[int]) -> Select[tuple[Submission]]:
    """Verified submissions reproducing the entries of ``submission_ids``, by teams other than
    the entry's own."""
    return (
        select(Submission)
        .join(Entry, Entry.submission_id == Submission.reproduction_of_id)
        .where(
            Submission.reproduction_of_id.in_(submission_ids),
            Submission.team_id != Entry.team_id,
            Submission.state == "verified",
        )
    )


def reproductions(session: Session, submission_id: int) -> list[Submission]:
    """The reproductions of ``submission_id``'s entry by other teams: each other team's
    earliest verified submission with the entry's run-episode traces, oldest first. A team's
    own resubmissions are not reproductions."""
    out: dict[int, Submission] = {}
    for submission in session.scalars(
        _other_teams_reproductions([submission_id])
        .options(selectinload(Submission.team))
        .order_by(Submission.id)
    ):
        out.setdefault(submission.team_id, submission)
    return list(out.values())


def reproduction_counts(session: Session, submission_ids: Collection[int]) -> dict[int, int]:
    """How many distinct other teams reproduced each entry, by the entry's submission id (an
    entry nobody else reproduced is absent)."""
    reproducing = _other_teams_reproductions(submission_ids).subquery()
    return {
        original: teams
        for original, teams in session.execute(
            select(
                reproducing.c.reproduction_of_id,
                func.count(func.distinct(reproducing.c.team_id)),
            ).group_by(reproducing.c.reproduction_of_id)
        )
    }
