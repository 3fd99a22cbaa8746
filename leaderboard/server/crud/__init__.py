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

The functions live by subject (``common``: refusals, the clock and the team lock; ``teams``;
``limits``: the rate limits; ``challenges``; ``submissions``; ``verdicts``; ``entries``) and are
all importable from here (``from leaderboard.server import crud``; ``crud.store_submission``).
"""

from leaderboard.server.crud.challenges import (
    as_challenge,
    store_challenge,
    usable_challenge,
)
from leaderboard.server.crud.common import (
    DAY,
    HOUR,
    Refused,
    lock_team,
    refuse_past,
    utcnow,
)
from leaderboard.server.crud.entries import (
    attempts,
    reproduction_counts,
    reproductions,
    track_entries,
    tracks,
)
from leaderboard.server.crud.limits import (
    challenge_submissions_since,
    challenges_since,
    check_challenge_rate,
    check_submission_rate,
    submissions_since,
)
from leaderboard.server.crud.submissions import (
    SUBMISSION_FIELDS,
    AlreadyUploaded,
    Upload,
    claim_next,
    get_submission,
    requeue_verifying,
    same_upload,
    store_submission,
)
from leaderboard.server.crud.teams import (
    active_token,
    add_token,
    check_team_name,
    create_team,
    list_teams,
    revoke_tokens,
    team_by_name,
)
from leaderboard.server.crud.verdicts import (
    COPIES_NAMED,
    VERDICT_LOCK,
    EpisodeOutcome,
    copied_from,
    record_verdict,
    traces_digest,
)

__all__ = [
    "COPIES_NAMED",
    "DAY",
    "HOUR",
    "SUBMISSION_FIELDS",
    "VERDICT_LOCK",
    "AlreadyUploaded",
    "EpisodeOutcome",
    "Refused",
    "Upload",
    "active_token",
    "add_token",
    "as_challenge",
    "attempts",
    "challenge_submissions_since",
    "challenges_since",
    "check_challenge_rate",
    "check_submission_rate",
    "check_team_name",
    "claim_next",
    "copied_from",
    "create_team",
    "get_submission",
    "list_teams",
    "lock_team",
    "record_verdict",
    "refuse_past",
    "reproduction_counts",
    "reproductions",
    "requeue_verifying",
    "revoke_tokens",
    "same_upload",
    "store_challenge",
    "store_submission",
    "submissions_since",
    "team_by_name",
    "traces_digest",
    "track_entries",
    "tracks",
    "usable_challenge",
    "utcnow",
]
