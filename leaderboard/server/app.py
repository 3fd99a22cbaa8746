"""The leaderboard's web application: the JSON API, the pages, and the verification pool.

:func:`create_app` builds the FastAPI app for one :class:`~leaderboard.server.settings.Settings`.
At start it upgrades the database to the newest migration, puts back in the queue every
submission a previous process left ``verifying`` (it died mid-verification), and starts the
worker pool; at shutdown it stops the pool. Every response carries a strict
Content-Security-Policy (no scripts at all; images and styles from the server only) and
``nosniff``. Refusals are JSON ``{"detail": ..., "field": ...}`` with the status saying why.
The OpenAPI spec of the JSON API is at ``/api/openapi.json``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from anyio import CapacityLimiter
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from benchmark.version import __version__
from leaderboard.core.archive import BundleError
from leaderboard.server import crud
from leaderboard.server.api import board, challenges, submissions
from leaderboard.server.db.session import open_database
from leaderboard.server.services import uploads
from leaderboard.server.settings import Settings
from leaderboard.server.web import pages
from leaderboard.server.worker import VerificationPool

log = logging.getLogger("leaderboard")

UPLOAD_THREADS = 4
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; img-src 'self'; style-src 'self'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def _error(status: int, detail: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail, "field": field}, status_code=status)


def create_app(settings: Settings, *, workers: bool = True) -> FastAPI:
    """The leaderboard app for ``settings``; ``workers=False`` accepts and shows submissions
    but verifies none (they stay queued until a server with workers starts)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sessions = open_database(settings.database_url)
        with sessions() as session:
            requeued = crud.requeue_verifying(session)
        if requeued:
            log.warning("requeued %d submission(s) left verifying by a previous server", requeued)
        uploads.prepare_storage(settings)
        pool = VerificationPool(settings, sessions)
        app.state.settings = settings
        app.state.sessions = sessions
        app.state.pool = pool
        # Uploads are read and checked in threads; a few at a time keeps each one fast (the
        # checks hold the GIL) and the rest wait their turn instead of starving every thread.
        app.state.upload_limiter = CapacityLimiter(UPLOAD_THREADS)
        if workers:
            pool.start()
        try:
            yield
        finally:
            if workers:
                pool.stop()
            sessions.kw["bind"].dispose()

    app = FastAPI(
        title="collab-bench leaderboard",
        version=__version__,
        description=(
            "Replay-verified submissions of the collab-bench tracks. Teams authenticate with "
            "`Authorization: Bearer <token>`; refusals are `{detail, field}` with a 4xx status."
        ),
        lifespan=lifespan,
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
    )

    @app.middleware("http")
    async def security_headers(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, err: StarletteHTTPException) -> JSONResponse:
        response = _error(err.status_code, str(err.detail))
        response.headers.update(err.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, err: RequestValidationError) -> JSONResponse:
        problems = [(".".join(str(part) for part in e["loc"]), e["msg"]) for e in err.errors()]
        detail = "; ".join(f"{where}: {msg}" for where, msg in problems)
        return _error(422, detail, problems[0][0] if problems else None)

    @app.exception_handler(BundleError)
    async def bundle_refused(_request: Request, err: BundleError) -> JSONResponse:
        return _error(err.status, str(err), err.field)

    @app.exception_handler(crud.Refused)
    async def refused(_request: Request, err: crud.Refused) -> JSONResponse:
        return _error(err.status, str(err))

    app.include_router(submissions.router)
    app.include_router(challenges.router)
    app.include_router(board.router)
    app.include_router(pages.router)
    return app
