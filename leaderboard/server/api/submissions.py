"""``POST /api/submissions`` (upload a bundle) and ``GET /api/submissions/{id}`` (its state).

An upload is checked at once, before it is stored: size (413 while it streams in, never read
whole into memory), the archive and every member (400/413/422, :mod:`leaderboard.core.bundle`),
the bundle-level checks of the track (422: an episode missing, duplicated or from another
track, :func:`leaderboard.core.verify.plan`), traces already on the board in another team's entry
(422, naming it: :func:`leaderboard.server.crud.copied_from`), and the rules of test submissions
(403/409/422/429). Only then is it kept and queued, and the answer is 202; the replays run in
the worker pool. Nothing is stored on a refusal.

What is kept is :func:`leaderboard.core.bundle.stored_form` of the upload: what the server verifies,
without the run's unverifiable bookkeeping. A team uploading the same bundle again (the same
stored form) while its first submission is not rejected gets that submission back (200), and
nothing new is stored.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import AsyncIterator
from typing import IO, Annotated

from anyio import to_thread
from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from pydantic import BaseModel
from sqlalchemy.orm import Session, sessionmaker
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from benchmark.results.challenge import Challenge
from leaderboard.core.bundle import read_bundle, stored_form
from leaderboard.core.untrusted import shown
from leaderboard.core.verify import plan
from leaderboard.server import board, crud
from leaderboard.server.auth import TeamIdentity, current_team
from leaderboard.server.db import models
from leaderboard.server.db.session import get_session
from leaderboard.server.settings import Settings

router = APIRouter(prefix="/api/submissions", tags=["submissions"])

ID_MAX = 2**31 - 1  # ids are 32-bit integers on PostgreSQL
MAX_REASONS = 20  # bundle-level reasons quoted in a 422 (the rest are counted)
_FORM_FIELDS = 4  # a form carries the file and perhaps a few small fields a client adds


class TooLarge(Exception):
    """The upload passed the size limit while streaming in."""


class Accepted(BaseModel):
    id: int
    state: str
    track: str
    url: str
    page: str


def bundle_name(sha256: str) -> str:
    """Where a new upload is kept, relative to the data directory: a name of its own (two
    uploads of the same archive are two files, so removing one never removes the other's)."""
    return f"bundles/{sha256[:16]}-{secrets.token_hex(8)}.tar.gz"


def _keep(stored: bytes, settings: Settings, sha256: str) -> str:
    """Write the bundle the server keeps to the data directory (aside, then renamed into
    place); returns its name relative to the data directory."""
    name = bundle_name(sha256)
    final = settings.data_dir / name
    partial = final.with_name(f".partial-{final.name}")
    with partial.open("wb") as out:
        out.write(stored)
        out.flush()
        os.fsync(out.fileno())
    partial.rename(final)
    return name


def _refuse_if_too_many(session: Session, team: TeamIdentity, settings: Settings) -> None:
    # A cheap first refusal before the upload is read; the binding check is store_submission's.
    crud.check_submission_rate(session, team.id, settings.submissions_per_hour)


def _challenge(
    sessions: sessionmaker[Session], team: TeamIdentity, claimed: str | None
) -> Challenge | None:
    """The challenge a manifest names, if the team may answer it (details: store time)."""
    if claimed is None:
        return None
    with sessions() as session:
        row = session.get(models.Challenge, claimed)
        if row is None:
            raise crud.Refused(422, f"manifest.challenge: {shown(claimed)} was never issued")
        if row.team_id != team.id:
            raise crud.Refused(403, f"challenge {shown(claimed)} was issued to another team")
        return crud.as_challenge(row)


def accept(
    upload: IO[bytes], team: TeamIdentity, settings: Settings, sessions: sessionmaker[Session]
) -> tuple[models.Submission, bool]:
    """Check an upload and queue it (see the module docstring); returns the submission and
    whether it was already there (the team uploaded the same bundle before and it was not
    rejected: nothing new is stored). Raises BundleError or crud.Refused with the status of a
    refusal, and then keeps nothing. No database connection is held while the bundle is read
    and checked (that takes CPU time)."""
    with sessions() as session:
        _refuse_if_too_many(session, team, settings)
    bundle = read_bundle(upload, settings.bundle_limits)
    claimed = bundle.manifest["challenge"]
    checked = plan(bundle, _challenge(sessions, team, claimed))
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
        existing = crud.same_upload(session, team.id, sha256)
        if existing is not None:
            return existing, True
        copied = crud.copied_from(session, team.id, checked.track.key, run_hashes)
        if copied is not None:
            raise crud.Refused(422, copied)
    name = _keep(stored, settings, sha256)
    fields = {k: v for k, v in bundle.submission.items() if k in crud.SUBMISSION_FIELDS}
    try:
        with sessions() as session:
            return crud.store_submission(
                session,
                team.id,
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
            ), False
    except crud.AlreadyUploaded as same:
        # An identical upload of the team's was stored while this one was being checked.
        _discard(settings, name)
        return same.submission, True
    except BaseException:
        _discard(settings, name)
        raise


def _discard(settings: Settings, name: str) -> None:
    """Remove a kept bundle no submission was stored for."""
    (settings.data_dir / name).unlink(missing_ok=True)


async def _limited(request: Request, limit: int) -> AsyncIterator[bytes]:
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise TooLarge
        yield chunk


def _too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"the upload is larger than the limit of {limit} bytes")


_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": (
                                "the bundle of `python -m leaderboard.client.pack` (.tar.gz)"
                            ),
                        }
                    },
                }
            }
        },
    }
}


@router.post(
    "",
    status_code=202,
    response_model=Accepted,
    openapi_extra=_UPLOAD_BODY,
    summary="Upload a bundle; it is queued for verification",
)
async def submit(
    request: Request, response: Response, team: Annotated[TeamIdentity, Depends(current_team)]
) -> Accepted:
    settings: Settings = request.app.state.settings
    limit = settings.bundle_limits.max_bytes
    declared = request.headers.get("content-length", "")
    # The form's boundaries take a few hundred bytes beside the file.
    if declared.isdigit() and int(declared) > limit + (1 << 16):
        raise _too_large(limit)
    if "multipart/form-data" not in request.headers.get("content-type", ""):
        raise HTTPException(422, "the bundle must be sent as multipart/form-data, field 'file'")
    parser = MultiPartParser(
        request.headers, _limited(request, limit + (1 << 16)), max_files=1, max_fields=_FORM_FIELDS
    )
    try:
        form = await parser.parse()
    except TooLarge:
        raise _too_large(limit) from None
    except MultiPartException as err:
        raise HTTPException(422, f"file: the form cannot be read: {err.message}") from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise HTTPException(422, "file: missing; send the bundle as the form field 'file'")
        submission, existing = await to_thread.run_sync(
            accept,
            upload.file,
            team,
            settings,
            request.app.state.sessions,
            limiter=request.app.state.upload_limiter,
        )
    finally:
        await form.close()
    if existing:
        response.status_code = 200
    else:
        request.app.state.pool.wake()
    return Accepted(
        id=submission.id,
        state=submission.state,
        track=submission.track,
        url=f"/api/submissions/{submission.id}",
        page=f"/submissions/{submission.id}",
    )


@router.get(
    "/{submission_id}",
    response_model=board.SubmissionView,
    summary="A submission's state: queued, verifying, verified or rejected, per episode",
)
def read_submission(
    submission_id: Annotated[int, Path(ge=1, le=ID_MAX)],
    session: Annotated[Session, Depends(get_session)],
) -> board.SubmissionView:
    view = board.submission_view(session, submission_id)
    if view is None:
        raise HTTPException(404, f"no submission {submission_id}")
    return view
