"""Issued challenges: kept under the daily limit, read back as the benchmark's record, and
checked before a submission may answer one."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from benchmark.results.challenge import Challenge, ChallengeEpisode, Partner
from leaderboard.server.crud.common import Refused, lock_team, utcnow
from leaderboard.server.crud.limits import check_challenge_rate
from leaderboard.server.db import models
from leaderboard.server.db.session import begin_write


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
        lock_team(session, team_id)
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
