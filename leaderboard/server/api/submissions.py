"""``POST /api/submissions`` (upload a bundle) and ``GET /api/submissions/{id}`` (its state).

The upload route reads the multipart form as it streams in, refusing (413) an upload past the
size limit without ever holding it whole in memory, and hands the file to
:func:`leaderboard.server.services.uploads.accept` in a thread, which checks it (400/403/409/413/
422/429, naming what is wrong), keeps it and queues it. The answer is 202 and the worker pool is
woken to replay it; an upload of a bundle the team already submitted, and that was not
rejected, is answered with that submission (200) and nothing new is stored. Nothing is stored on
a refusal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from anyio import to_thread
from fastapi import APIRouter, Depends, HTTPException, Path, Request, Response
from pydantic import BaseModel
from sqlalchemy.orm import Session
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from leaderboard.server import board
from leaderboard.server.api.deps import get_session
from leaderboard.server.auth import TeamIdentity, current_team
from leaderboard.server.services import uploads
from leaderboard.server.settings import Settings

router = APIRouter(prefix="/api/submissions", tags=["submissions"])

ID_MAX = 2**31 - 1  # ids are 32-bit integers on PostgreSQL
_FORM_FIELDS = 4  # a form carries the file and perhaps a few small fields a client adds


class TooLarge(Exception):
    """The upload passed the size limit while streaming in."""


class Accepted(BaseModel):
    id: int
    state: str
    track: str
    url: str
    page: str


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
            uploads.accept,
            upload.file,
            team.id,
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
