"""The board's entries: by track, the attempts behind them, and their reproductions by other
teams."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, selectinload

from benchmark.results.suite import suites
from leaderboard.core.tracks import Track
from leaderboard.server.db import models
from leaderboard.server.db.models import Entry, Submission


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
