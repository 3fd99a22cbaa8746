"""Issuing a challenge: the episodes of a hidden-seed test suite, drawn for one team.

A team draws at most ``settings.challenges_per_day`` challenges in any 24 hours (429 past it,
concurrent requests included: the binding check is ``crud.store_challenge``'s). The seeds are
drawn by :func:`leaderboard.core.challenges.issue_challenge` from the server's secret; the
challenge is kept, and a submission answering it names its id in the manifest. A suite with a
focal seat (cross-play, human) also gets its partners, from the server's partner pool
(``partner_population`` and ``partner_labels``: :func:`leaderboard.core.challenges.partner_pool`);
a pool that cannot be used (a named member verification cannot re-run) refuses the challenge
(503), naming the member.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from benchmark.results.challenge import Challenge
from benchmark.results.suite import load_suite, suites
from leaderboard.core.challenges import issue_challenge, partner_pool
from leaderboard.server import crud
from leaderboard.server.settings import Settings


def hidden_suites() -> list[str]:
    """The suites whose seeds are hidden (the only ones that issue challenges), by name."""
    return sorted(name for name, suite in suites().items() if suite.hidden)


def issue(
    session: Session,
    team_id: int,
    team_name: str,
    suite: str,
    settings: Settings,
    now: datetime | None = None,
) -> Challenge:
    """Draw a challenge of ``suite`` for team ``team_id`` (named ``team_name``) and keep it;
    returns it. Refused: 422 when ``suite`` is not a hidden-seed suite, 429 when the team drew
    ``settings.challenges_per_day`` challenges in the 24 hours before ``now``, 503 when the
    suite has a focal seat and the server's partner pool cannot be used."""
    hidden = hidden_suites()
    if suite not in hidden:
        raise crud.Refused(422, f"suite: {suite!r} is not a hidden-seed suite; those are {hidden}")
    now = now or crud.utcnow()
    # A cheap first refusal before the draw (the draw is slow).
    crud.check_challenge_rate(session, team_id, settings.challenges_per_day, now)
    partners = ()
    if load_suite(suite).focal is not None:
        try:
            partners = partner_pool(settings.partner_population, settings.partner_label_list)
        except ValueError as err:
            raise crud.Refused(503, f"the server cannot assign partners: {err}") from None
    challenge = issue_challenge(
        settings.secret,
        team_name,
        suite,
        now=now,
        lifetime=timedelta(hours=settings.challenge_lifetime_h),
        scenes=settings.challenge_scenes,
        partners=partners,
    )
    crud.store_challenge(
        session, team_id, challenge, issued_at=now, daily_limit=settings.challenges_per_day
    )
    return challenge
