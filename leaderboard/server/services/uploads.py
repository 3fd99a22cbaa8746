"""Accepting an upload: check a bundle, keep it, and queue its submission.

An upload is checked before anything is stored: the archive and every member
(:func:`leaderboard.core.bundle.read_bundle` under the settings' limits: BundleError 400, 413 or
422), the bundle-level checks of the track (Refused 422: an episode missing, duplicated or from
another track, :func:`leaderboard.core.verify.plan`), the challenge its manifest names (422 never
issued, 403 issued to another team), traces already on the board in another team's entry
(422, naming it: :func:`leaderboard.server.crud.copied_from`), and the rate limits and rules of
test submissions (403/409/422/429, :func:`leaderboard.server.crud.store_submission`). Nothing is
kept on a refusal.

What is kept is :func:`leaderboard.core.bundle.stored_form` of the upload: what the server
verifies, without the run's unverifiable bookkeeping. A team uploading the same bundle again
(the same stored form) while its first submission is not rejected gets that submission back,
and nothing new is stored.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from typing import IO, NamedTuple

from sqlalchemy.orm import Session, sessionmaker

from benchmark.results.challenge import Challenge
from leaderboard.core.bundle import read_bundle, stored_form
from leaderboard.core.untrusted import shown
from leaderboard.core.verify import plan
from leaderboard.server import crud
from leaderboard.server.db import models
from leaderboard.server.settings import Settings

MAX_REASONS = 20  # bundle-level reasons quoted in a refusal (the rest are counted)
PARTIAL_PREFIX = ".partial-"  # a bundle being written, before it is renamed into place


class Acceptance(NamedTuple):
    """An accepted upload: its submission, and whether it was already there (the team
    uploaded the same bundle before and it was not rejected: nothing new was stored)."""

    submission: models.Submission
    existing: bool


def bundle_name(sha256: str) -> str:
    """Where a new upload is kept, relative to the data directory: a name of its own (two
    uploads of the same archive are two files, so removing one never removes the other's)."""
    return f"bundles/{sha256[:16]}-{secrets.token_hex(8)}.tar.gz"


def prepare_storage(settings: Settings) -> None:
    """Make the bundles directory, and remove the bundles a previous server was writing when
    it died (they were never a submission)."""
    settings.bundles_dir.mkdir(parents=True, exist_ok=True)
    for partial in settings.bundles_dir.glob(f"{PARTIAL_PREFIX}*"):
        partial.unlink()


def keep(stored: bytes, settings: Settings, sha256: str) -> str:
    """Write the bundle the server keeps to the data directory (aside, then renamed into
    place); returns its name relative to the data directory."""
    name = bundle_name(sha256)
    final = settings.data_dir / name
    partial = final.with_name(f"{PARTIAL_PREFIX}{final.name}")
    with partial.open("wb") as out:
        out.write(stored)
        out.flush()
        os.fsync(out.fileno())
    partial.rename(final)
    return name


def discard(settings: Settings, name: str) -> None:
    """Remove a kept bundle no submission was stored for."""
    (settings.data_dir / name).unlink(missing_ok=True)


def check_rate(session: Session, team_id: int, settings: Settings) -> None:
    """Refuse (429) an upload of a team past its hourly limit: a cheap first refusal before
    the upload is read (the binding check is ``crud.store_submission``'s)."""
    crud.check_submission_rate(session, team_id, settings.submissions_per_hour)


def claimed_challenge(
    sessions: sessionmaker[Session], team_id: int, claimed: str | None
) -> Challenge | None:
    """The challenge a manifest names, if the team may answer it: 422 when it was never
    issued, 403 when it was issued to another team (whether it is still usable is checked
    when the submission is stored)."""
    if claimed is None:
        return None
    with sessions() as session:
        row = session.get(models.Challenge, claimed)
        if row is None:
            raise crud.Refused(422, f"manifest.challenge: {shown(claimed)} was never issued")
        if row.team_id != team_id:
            raise crud.Refused(403, f"challenge {shown(claimed)} was issued to another team")
        return crud.as_challenge(row)


def accept(
    upload: IO[bytes], team_id: int, settings: Settings, sessions: sessionmaker[Session]
) -> Acceptance:
    """Check the bundle ``upload`` of team ``team_id`` and queue it (see the module
    docstring). Raises BundleError or crud.Refused, carrying the status of the refusal, and
    then keeps nothing. No database connection is held while the bundle is read and checked
    (that takes CPU time)."""
    with sessions() as session:
        check_rate(session, team_id, settings)
    bundle = read_bundle(upload, settings.bundle_limits)
    claimed = bundle.manifest["challenge"]
    checked = plan(bundle, claimed_challenge(sessions, team_id, claimed))
    if checked.reasons:
        listed = "; ".join(checked.reasons[:MAX_REASONS])
        more = len(checked.reasons) - MAX_REASONS
        raise crud.Refused(
            422,
            f"the bundle does not hold the episodes of track {checked.track.key}: {listed}"
            + (f"; and {more} more" if more > 0 else ""),
        )
    stored = stored_form(bundle)
    sha256 = hashlib.sha256(stored).hexdigest()
    run_hashes = [trace["trace_hash"] for ref, _, trace in checked.jobs if not ref.reference]
    with sessions() as session:
        existing = crud.same_upload(session, team_id, sha256)
        if existing is not None:
            return Acceptance(existing, True)
        copied = crud.copied_from(session, team_id, checked.track.key, run_hashes)
        if copied is not None:
            raise crud.Refused(422, copied)
    name = keep(stored, settings, sha256)
    fields = {k: v for k, v in bundle.submission.items() if k in crud.SUBMISSION_FIELDS}
    try:
        with sessions() as session:
            submission = crud.store_submission(
                session,
                team_id,
                crud.Upload(
                    track=checked.track.key,
                    suite=checked.track.suite,
                    suite_version=checked.track.suite_version,
                    bundle_path=name,
                    bundle_sha256=sha256,
                    fields=fields,
                    challenge_id=claimed,
                ),
                daily_limit=settings.test_submissions_per_day,
                hourly_limit=settings.submissions_per_hour,
            )
            return Acceptance(submission, False)
    except crud.AlreadyUploaded as same:
        # An identical upload of the team's was stored while this one was being checked.
        discard(settings, name)
        return Acceptance(same.submission, True)
    except BaseException:
        discard(settings, name)
        raise
