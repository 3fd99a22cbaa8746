"""The pages of a play session: one per seat, at ``/seat/<token>``, and an overview at ``/``.

A seat's page shows what its agent knows (its observation text, its map of what it has seen,
the messages it received, the checklist under its observability) and, when it must decide, a
plain form: a select of exactly the valid actions now, a recipient and a message box, and a
hidden ``tick``. A post is taken or refused (:class:`~benchmark.play.choices.FormError`: a stale
tick, an action not valid now, a message over the cap), the refusal shown above the form again
(HTTP 409 for a stale or untimely post, 422 for a malformed one). While the seat waits for
others the page reloads itself every few seconds. Everything shown is escaped by Jinja's
autoescape; the pages need no script.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool

from benchmark.play.choices import FormError, StaleForm, grouped
from benchmark.play.session import PlaySession
from benchmark.play.view import checklist
from benchmark.skills import action_menu

TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).resolve().parent / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
)
REFRESH_S = 2  # how often a waiting seat's page reloads


def _page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("refresh", 0)
    html = TEMPLATES.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})


def create_app(session: PlaySession) -> FastAPI:
    """The FastAPI app serving ``session``'s pages."""
    app = FastAPI(title="collab-bench play", docs_url=None, redoc_url=None, openapi_url=None)
    members = session.team.members()
    partners = ", ".join(sorted({m for a, m in members.items() if a not in session.seats}))

    def seat_page(token: str, error: str = "", status: int = 200, message: str = ""):
        try:
            seat = session.seat(token)
        except KeyError:
            return _page(
                "missing.html",
                404,
                title="no seat",
                session=session,
                error="no seat has this address",
            )
        with session.lock:
            agent = seat.agent
            choice = session.choice(agent) if session.deciding(agent) else None
            waiting = [a for a in session.waiting_for() if a != agent]
            return _page(
                "seat.html",
                status,
                title=agent,
                session=session,
                seat=seat,
                error=error,
                choice=choice,
                groups=grouped(choice.actions) if choice else [],
                message=message,
                waiting=waiting,
                finished=session.env.finished[seat.index],
                refresh=REFRESH_S if choice is None and not session.over else 0,
                observation=session.observation(agent),
                checklist=checklist(session.info),
                full=session.info.privileged is not None,
                menu=action_menu(),
                cannot=session.info.cannot.get(agent, ()),
                partners=partners or "none (people only)",
            )

    @app.get("/", response_class=HTMLResponse)
    def index() -> HTMLResponse:
        with session.lock:
            waiting = session.waiting_for()
        return _page("index.html", title="play", session=session, members=members, waiting=waiting)

    @app.get("/seat/{token}", response_class=HTMLResponse)
    def show(token: str) -> HTMLResponse:
        return seat_page(token)

    @app.post("/seat/{token}", response_model=None)
    async def decide(token: str, request: Request) -> Response:
        try:
            seat = session.seat(token)
        except KeyError:
            return seat_page(token)
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        try:
            await run_in_threadpool(session.post, seat.agent, form)
        except FormError as err:
            status = 409 if isinstance(err, StaleForm) else 422
            return seat_page(token, str(err), status, form.get("message", ""))
        return RedirectResponse(f"/seat/{token}", status_code=303)

    @app.get("/seat/{token}/map.png")
    def seat_map(token: str) -> Response:
        try:
            seat = session.seat(token)
        except KeyError:
            return Response("no seat has this address", status_code=404, media_type="text/plain")
        png = session.map_png(seat.agent)
        return Response(png, media_type="image/png", headers={"Cache-Control": "no-store"})

    return app
