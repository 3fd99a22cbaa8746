"""The board's pages, rendered by the server: the tracks, a track's sortable table, an entry
(per-family table, metrics plot, its episodes, reproductions, bundle download), an entry's
episode list, the replay of any of its episodes tick by tick, and a submission's state.

Everything is escaped by Jinja2's autoescape (team names, methods, descriptions, URLs); a
link is made only of an ``http://`` or ``https://`` URL. The pages need no script and no
inline style: the app's Content-Security-Policy allows neither (``/static/style.css`` is the
one stylesheet). Sorting is server-side: column headers are links ``?sort=<col>&order=``; a
replay moves from tick to tick by links ``?tick=<t>``, each showing the PNG of that tick.
A malformed episode number, tick or page is a 422 page, one that is not there a 404 page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from sqlalchemy.orm import Session

from leaderboard.core.ranking import EPISODE_METRICS, interval_caption
from leaderboard.server import board
from leaderboard.server.api.deps import get_session
from leaderboard.server.db.models import Entry
from leaderboard.server.render import PLOT_DPI, PLOT_INCHES, gif_step
from leaderboard.server.web import images, replays

HERE = Path(__file__).resolve().parent
STYLE = HERE / "static" / "style.css"
MAX_ID = 2**31 - 1  # ids are INTEGER columns
PLOT_SIZE = (int(PLOT_INCHES[0] * PLOT_DPI), int(PLOT_INCHES[1] * PLOT_DPI))  # pixels
_COUNT = re.compile(r"[0-9]{1,9}")  # an episode number, tick or page as a query or path gives it
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
# A soft hyphen (U+00AD) lets the longest header break, so the table fits a 1400 px page.
TABLE_COLUMNS = (
    ("rank", "rank", None),
    ("team", "team", None),
    ("method", "method", None),
    *((c, "comm tokens" if c == "comm_tokens" else c, m) for c, m in board.METRIC_COLUMNS.items()),
    ("llm_tokens", "LLM tokens*", None),
    ("wall_time_s", "wall time*", None),
    ("attempts", "attempts", None),
    ("reproductions", "repro\u00adductions", None),
    ("created", "created", None),
)
# Decimals of a metric's cells: counts of ticks and tokens need one, fractions two.
DIGITS = {"L": 1, "message_tokens": 1}

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
    """``[lo, hi]`` of a cell; ``n=1`` for a cell of one value without bounds (a Student-t
    interval needs two); an empty string when the metric is undefined."""
    if not cell or cell.get("mean") is None:
        return ""
    if cell.get("lo") is None:
        return f"n={cell.get('n', 0)}"
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
TEMPLATES.filters.update(
    number=number, interval=interval, link=link, interval_caption=interval_caption
)


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    """Template ``name`` rendered with ``context``."""
    return HTMLResponse(TEMPLATES.get_template(name).render(**context), status_code=status)


def not_found(what: str) -> HTMLResponse:
    return page("error.html", status=404, title="Not found", message=f"There is no {what}.")


def bad_request(message: str) -> HTMLResponse:
    return page("error.html", status=422, title="Bad request", message=message)


def count(value: str | None, name: str, default: int) -> int | HTMLResponse:
    """``value`` (a path segment or query parameter) as a non-negative integer, ``default``
    when absent; a 422 page naming ``name`` when it is not one."""
    if value is None:
        return default
    if not _COUNT.fullmatch(value):
        return bad_request(f"{name}: {value!r} is not a whole number from 0 to 999999999")
    return int(value)


SessionDep = Annotated[Session, Depends(get_session)]


def _entry(session: Session, entry_id: int) -> Entry | HTMLResponse:
    """Entry ``entry_id``, or the 404 page saying there is none."""
    found = board.get_entry(session, entry_id) if 1 <= entry_id <= MAX_ID else None
    return not_found(f"entry {entry_id}") if found is None else found


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
        return bad_request(str(err))
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
        digits=DIGITS,
        header_order=header_order,
    )


@router.get("/entries/{entry_id}", response_class=HTMLResponse)
def entry(entry_id: int, request: Request, session: SessionDep) -> HTMLResponse:
    view = board.entry_view(session, entry_id) if 1 <= entry_id <= MAX_ID else None
    if view is None:
        return not_found(f"entry {entry_id}")
    families = sorted(view.families.items(), key=lambda kv: (kv[0] != "all", kv[0]))
    episodes = images.run_episodes(request.app.state.settings, view.bundle_path, view.bundle_sha256)
    pages = replays.paginate(len(episodes), 1)
    return page(
        "entry.html",
        title=f"{view.method} by {view.team}",
        entry=view,
        families=families,
        family_columns=FAMILY_COLUMNS,
        digits=DIGITS,
        all_metrics=[(m, view.families["all"].get(m)) for m in EPISODE_METRICS],
        episodes=episodes[pages.start : pages.stop],
        pages=pages,
        metrics=board.episode_metrics(session, view.submission_id),
        plot_others=min(images.PLOT_OTHERS, view.track.entries - 1),
        plot_size=PLOT_SIZE,
    )


@router.get("/entries/{entry_id}/plot.png")
def entry_plot(entry_id: int, session: SessionDep) -> Response:
    png = images.entry_plot(session, entry_id) if 1 <= entry_id <= MAX_ID else None
    if png is None:
        return not_found(f"entry {entry_id}")
    return Response(png, media_type="image/png")


@router.get("/entries/{entry_id}/episodes", response_class=HTMLResponse)
def entry_episodes(
    entry_id: int,
    request: Request,
    session: SessionDep,
    page_number: Annotated[str | None, Query(alias="page")] = None,
) -> HTMLResponse:
    found = _entry(session, entry_id)
    if isinstance(found, HTMLResponse):
        return found
    wanted = count(page_number, "page", 1)
    if isinstance(wanted, HTMLResponse):
        return wanted
    submission = found.submission
    episodes = images.run_episodes(
        request.app.state.settings, submission.bundle_path, submission.bundle_sha256
    )
    try:
        pages = replays.paginate(len(episodes), wanted)
    except ValueError as err:
        return not_found(f"page {wanted} of the episodes of entry {entry_id} ({err})")
    return page(
        "episodes.html",
        title=f"Episodes of entry {entry_id}",
        entry=found,
        episodes=episodes[pages.start : pages.stop],
        pages=pages,
        metrics=board.episode_metrics(session, submission.id),
    )


@router.get("/entries/{entry_id}/episodes/{n}.gif")
def episode_gif(entry_id: int, n: str, request: Request, session: SessionDep) -> Response:
    index = count(n, "episode", 0)
    gif = None
    if 1 <= entry_id <= MAX_ID and isinstance(index, int):
        gif = images.episode_gif(session, request.app.state.settings, entry_id, index)
    if gif is None:
        return not_found(f"replay {n} of entry {entry_id}")
    return Response(gif, media_type="image/gif")


@router.get("/entries/{entry_id}/episodes/{n}/ticks/{tick}.png")
def episode_frame(
    entry_id: int, n: str, tick: str, request: Request, session: SessionDep
) -> Response:
    index, at = count(n, "episode", 0), count(tick, "tick", 0)
    png = None
    if 1 <= entry_id <= MAX_ID and isinstance(index, int) and isinstance(at, int):
        png = images.episode_frame(session, request.app.state.settings, entry_id, index, at)
    if png is None:
        return not_found(f"tick {tick} of replay {n} of entry {entry_id}")
    return Response(png, media_type="image/png")


@router.get("/entries/{entry_id}/episodes/{n}", response_class=HTMLResponse)
def episode_replay(
    entry_id: int, n: str, request: Request, session: SessionDep, tick: str | None = None
) -> HTMLResponse:
    found = _entry(session, entry_id)
    if isinstance(found, HTMLResponse):
        return found
    index = count(n, "episode", 0)
    if isinstance(index, HTMLResponse):
        return index
    at = count(tick, "tick", 0)
    if isinstance(at, HTMLResponse):
        return at
    submission = found.submission
    settings = request.app.state.settings
    episodes = images.run_episodes(settings, submission.bundle_path, submission.bundle_sha256)
    trace = images.episode_trace(settings, submission.bundle_path, submission.bundle_sha256, index)
    if trace is None or index >= len(episodes):
        return not_found(f"episode {index} of entry {entry_id} on this server")
    ticks = trace["final"]["ticks"]
    if at > ticks:
        return not_found(f"tick {at} in episode {index} of entry {entry_id} (ticks 0 to {ticks})")
    return page(
        "replay.html",
        title=f"Replay {index} of entry {entry_id}",
        entry=found,
        episode=episodes[index],
        episodes=len(episodes),
        view=replays.tick_view(trace, at),
        links=replays.tick_links(at, ticks),
        episodes_per_page=replays.EPISODES_PER_PAGE,
        gif_step=gif_step(ticks),
        metrics=board.episode_metrics(session, submission.id).get(episodes[index].key, {}),
    )


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission(submission_id: int, session: SessionDep) -> HTMLResponse:
    view = board.submission_view(session, submission_id) if 1 <= submission_id <= MAX_ID else None
    if view is None:
        return not_found(f"submission {submission_id}")
    return page("submission.html", title=f"Submission {view.id}", submission=view)
