"""The board's pages, rendered by the server: the tracks, a track's sortable table, an entry
(per-family table, metrics plot, replay GIFs, bundle download) and a submission's state.

Everything is escaped by Jinja2's autoescape (team names, methods, descriptions, URLs); a
link is made only of an ``http://`` or ``https://`` URL. The pages need no script and no
inline style: the app's Content-Security-Policy allows neither (``/static/style.css`` is the
one stylesheet). Sorting is server-side: column headers are links ``?sort=<col>&order=``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from sqlalchemy.orm import Session

from leaderboard import board
from leaderboard.db.session import get_session
from leaderboard.ranking import EPISODE_METRICS
from leaderboard.web import images

HERE = Path(__file__).resolve().parent
STYLE = HERE / "static" / "style.css"
MAX_ID = 2**31 - 1  # ids are INTEGER columns
# Columns of the per-family table of an entry (metric name in the summary, header).
FAMILY_COLUMNS = (
    ("SR", "SR"),
    ("TR", "TR"),
    ("C", "C"),
    ("B", "B"),
    ("L", "L"),
    ("speedup", "speedup"),
    ("EI", "EI"),
    ("message_tokens", "comm tokens"),
)
# Columns of a track's table: sort key, header, metric of the summary (None: not a metric).
TABLE_COLUMNS = (
    ("rank", "rank", None),
    ("team", "team", None),
    ("method", "method", None),
    *((c, "comm tokens" if c == "comm_tokens" else c, m) for c, m in board.METRIC_COLUMNS.items()),
    ("llm_tokens", "LLM tokens*", None),
    ("wall_time_s", "wall time*", None),
    ("attempts", "attempts", None),
    ("reproductions", "reproductions", None),
    ("created", "created", None),
)

router = APIRouter(include_in_schema=False)


def number(value: Any, digits: int = 2) -> str:
    """A number for a cell: integers with thousands separators, reals with ``digits``
    decimals, ``–`` for None."""
    if value is None:
        return "–"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def interval(cell: dict[str, Any] | None, digits: int = 2) -> str:
    """``[lo, hi]`` of a cell, or an empty string when the metric is undefined."""
    if not cell or cell.get("lo") is None:
        return ""
    return f"[{number(cell['lo'], digits)}, {number(cell['hi'], digits)}]"


def link(url: str | None) -> str | None:
    """``url`` if it may be a link (http or https), else None."""
    return url if url and url.startswith(("https://", "http://")) else None


TEMPLATES = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
TEMPLATES.filters.update(number=number, interval=interval, link=link)


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Template ``name`` rendered with ``context``."""
    return HTMLResponse(TEMPLATES.get_template(name).render(**context), status_code=status)


def not_found(what: str) -> HTMLResponse:
    return page("error.html", status=404, title="Not found", message=f"There is no {what}.")


SessionDep = Annotated[Session, Depends(get_session)]


@router.get("/static/style.css")
def style() -> FileResponse:
    return FileResponse(STYLE, media_type="text/css")


@router.get("/favicon.ico")
def favicon() -> Response:
    # Browsers ask for it on every site; the board has no icon, and says so without a 404.
    return Response(status_code=204)


@router.get("/", response_class=HTMLResponse)
def index(session: SessionDep) -> HTMLResponse:
    return page("index.html", title="Tracks", groups=board.suite_versions(session))


@router.get("/tracks/{key}", response_class=HTMLResponse)
def track(
    key: str, session: SessionDep, sort: str = "rank", order: str | None = None
) -> HTMLResponse:
    try:
        table = board.track_view(session, key, sort, order)
    except board.SortError as err:
        return page("error.html", status=422, title="Bad request", message=str(err))
    if table is None:
        return not_found(f"track {key!r} on the board")

    def header_order(column: str) -> str:
        if column == table.sort:
            return "desc" if table.order == "asc" else "asc"
        return board.default_order(column)

    return page(
        "track.html",
        title=table.track.key,
        table=table,
        columns=TABLE_COLUMNS,
        header_order=header_order,
    )


@router.get("/entries/{entry_id}", response_class=HTMLResponse)
def entry(entry_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    view = board.entry_view(session, entry_id) if 1 <= entry_id <= MAX_ID else None
    if view is None:
        return not_found(f"entry {entry_id}")
    families = sorted(view.families.items(), key=lambda kv: (kv[0] != "all", kv[0]))
    return page(
        "entry.html",
        title=f"{view.method} by {view.team}",
        entry=view,
        families=families,
        family_columns=FAMILY_COLUMNS,
        all_metrics=[(m, view.families["all"].get(m)) for m in EPISODE_METRICS],
        episodes=images.run_episodes(request.app.state.settings, view),
        plot_others=min(images.PLOT_OTHERS, view.track.entries - 1),
    )


@router.get("/entries/{entry_id}/plot.png")
def entry_plot(entry_id: int, session: SessionDep) -> Response:
    png = images.entry_plot(session, entry_id) if 1 <= entry_id <= MAX_ID else None
    if png is None:
        return not_found(f"entry {entry_id}")
    return Response(png, media_type="image/png")


@router.get("/entries/{entry_id}/episodes/{n}.gif")
def episode_gif(entry_id: int, n: int, request: Request, session: SessionDep) -> Response:
    gif = None
    if 1 <= entry_id <= MAX_ID:
        gif = images.episode_gif(session, request.app.state.settings, entry_id, n)
    if gif is None:
        return not_found(f"replay {n} of entry {entry_id}")
    return Response(gif, media_type="image/gif")


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission(submission_id: int, session: SessionDep) -> HTMLResponse:
    view = board.submission_view(session, submission_id) if 1 <= submission_id <= MAX_ID else None
    if view is None:
        return not_found(f"submission {submission_id}")
    return page("submission.html", title=f"Submission {view.id}", submission=view)
