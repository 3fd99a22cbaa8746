"""The board's JSON API: tracks, a track's ranked table, an entry, its bundle, and the export.

Every route only reads; the views come from :mod:`leaderboard.server.board` (the pages show the same
ones). Response models make the OpenAPI spec (``/api/openapi.json``) say exactly what each
answer holds.
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response
from fastapi.responses import FileResponse
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from leaderboard.core.ranking import EPISODE_METRICS, RUN_METRICS
from leaderboard.server import board
from leaderboard.server.api.deps import get_session
from leaderboard.server.export import export_archive
from leaderboard.server.settings import Settings

router = APIRouter(prefix="/api", tags=["board"])

# Ids are INTEGER columns: larger numbers name nothing (and PostgreSQL refuses them).
MAX_ID = 2**31 - 1
EntryId = Annotated[int, Path(ge=1, le=MAX_ID, description="the entry's id")]
SortColumn = Literal[board.SORT_COLUMNS]  # type: ignore[valid-type]
ATTEMPTS = (
    "the team's attempts on this track: its submissions to the track in every state; on a "
    "hidden-seed track, every challenge it drew for the suite, answered or not"
)


class Interval(BaseModel):
    """A mean with its 95% interval, computed by the metric's declared method (see
    ``intervals``); all None when no episode defines the metric, and the bounds None when a
    Student-t interval has fewer than two values."""

    mean: float | None
    lo: float | None
    hi: float | None
    n: int = Field(description="episodes that define the metric")
    successes: int | None = Field(None, description="SR only: successful episodes")


IntervalMethods = Annotated[
    dict[str, str],
    Field(
        description="per-episode metric -> how its 95% interval is computed, as the metric's "
        "declaration says (SR: Clopper-Pearson; the others: Student-t)"
    ),
]


class TrackOut(BaseModel):
    key: str = Field(description="e.g. smoke-v1.n2.comm-on.partial.skill")
    suite: str
    suite_version: str
    n_agents: int
    comm: bool
    observability: str
    action_level: str
    entries: int
    hidden_seeds: bool = Field(
        description="the suite hides its seeds: episodes come from challenges the board issues"
    )
    url: str
    page: str


class SuiteVersionOut(BaseModel):
    suite: str
    suite_version: str
    tracks: list[TrackOut]


class TracksOut(BaseModel):
    suite_versions: list[SuiteVersionOut] = Field(
        description="tracks grouped by suite and version (tables of versions never mix)"
    )


class RowOut(BaseModel):
    rank: int = Field(description="1 + entries whose SR lower bound is above this one's upper")
    entry: int
    submission: int
    team: str
    method: str
    model: str
    SR: Interval
    TR: Interval
    C: Interval
    B: Interval
    L: Interval
    speedup: Interval
    EI: Interval
    comm_tokens: Interval = Field(description="message tokens per episode")
    llm_tokens: int | None = Field(description="self-reported by the team, not verified")
    wall_time_s: float | None = Field(description="self-reported by the team, not verified")
    attempts: int = Field(description=ATTEMPTS)
    reproductions: int = Field(
        description="other teams with a verified submission whose traces equal this entry's"
    )
    created_at: datetime
    url: str
    page: str


class TrackTableOut(BaseModel):
    track: TrackOut
    sort: SortColumn
    order: Literal["asc", "desc"]
    intervals: IntervalMethods
    all_tied: bool = Field(
        description="two or more entries, all of rank 1: every SR interval overlaps every "
        "other, so the track's episodes cannot separate its entries"
    )
    rows: list[RowOut]


class FamilyOut(BaseModel):
    episodes: int = Field(description="run episodes of the family")
    metrics: dict[str, Interval] = Field(description="per-episode metrics: mean and interval")
    run_metrics: dict[str, float | None] = Field(description="metrics of the whole run")


class SelfReported(BaseModel):
    """What the team reported about its run; the server does not verify these."""

    llm_tokens: int | None
    wall_time_s: float | None


class ReproductionOut(BaseModel):
    """Another team's verified submission with the entry's traces (the earliest of its team)."""

    submission: int
    team: str
    created_at: datetime
    method: str
    model: str
    description: str
    code_url: str | None
    paper_url: str | None
    self_reported: SelfReported


class EntryOut(BaseModel):
    id: int
    submission: int
    track: TrackOut
    rank: int
    team: str
    method: str
    description: str
    model: str
    parameters: int | None
    code_url: str | None
    paper_url: str | None
    created_at: datetime
    episodes: int = Field(description="run episodes (one-agent references not counted)")
    intervals: IntervalMethods
    families: dict[str, FamilyOut] = Field(description="per task family, and 'all'")
    attempts: int = Field(description=ATTEMPTS)
    reproductions: list[ReproductionOut] = Field(
        description="one per other team that reproduced the entry; a team's own resubmissions "
        "are not reproductions"
    )
    self_reported: SelfReported
    bundle: str = Field(description="URL of the verified bundle (.tar.gz)")
    page: str


def track_out(info: board.TrackInfo) -> TrackOut:
    return TrackOut(**vars(info), url=f"/api/tracks/{info.key}", page=f"/tracks/{info.key}")


def _interval(cell: dict | None) -> Interval:
    cell = cell or {}
    return Interval(
        mean=cell.get("mean"),
        lo=cell.get("lo"),
        hi=cell.get("hi"),
        n=cell.get("n", 0),
        successes=cell.get("successes"),
    )


def row_out(row: board.BoardRow) -> RowOut:
    metrics = {c: _interval(row.metrics.get(m)) for c, m in board.METRIC_COLUMNS.items()}
    return RowOut(
        rank=row.rank,
        entry=row.entry_id,
        submission=row.submission_id,
        team=row.team,
        method=row.method,
        model=row.model,
        **metrics,
        llm_tokens=row.llm_tokens,
        wall_time_s=row.wall_time_s,
        attempts=row.attempts,
        reproductions=row.reproductions,
        created_at=row.created_at,
        url=f"/api/entries/{row.entry_id}",
        page=f"/entries/{row.entry_id}",
    )


def family_out(cells: dict) -> FamilyOut:
    return FamilyOut(
        episodes=cells.get("episodes", 0),
        metrics={m: _interval(cells.get(m)) for m in EPISODE_METRICS if m in cells},
        run_metrics={m: cells.get(m) for m in RUN_METRICS if m in cells},
    )


@router.get("/tracks", response_model=TracksOut, summary="Every track, by suite version")
def list_tracks(session: Annotated[Session, Depends(get_session)]) -> TracksOut:
    return TracksOut(
        suite_versions=[
            SuiteVersionOut(
                suite=g.suite,
                suite_version=g.suite_version,
                tracks=[track_out(t) for t in g.tracks],
            )
            for g in board.suite_versions(session)
        ]
    )


@router.get(
    "/tracks/{key}",
    response_model=TrackTableOut,
    summary="A track's ranked table, sorted by any column (rows without a value last)",
    responses={404: {"description": "no such track on the board"}},
)
def read_track(
    key: Annotated[str, Path(max_length=200)],
    session: Annotated[Session, Depends(get_session)],
    sort: Annotated[SortColumn, Query(description="the column to sort by")] = "rank",
    order: Annotated[
        Literal["asc", "desc"] | None, Query(description="default: the column's best first")
    ] = None,
) -> TrackTableOut:
    table = board.track_view(session, key, sort, order)
    if table is None:
        raise HTTPException(404, f"no track {key!r} on the board")
    return TrackTableOut(
        track=track_out(table.track),
        sort=table.sort,
        order=table.order,
        intervals=table.intervals,
        all_tied=table.all_tied,
        rows=[row_out(r) for r in table.rows],
    )


@router.get(
    "/entries/{entry_id}",
    response_model=EntryOut,
    summary="An entry: per-family metrics with intervals, attempts and reproductions",
    responses={404: {"description": "no such entry"}},
)
def read_entry(entry_id: EntryId, session: Annotated[Session, Depends(get_session)]) -> EntryOut:
    view = board.entry_view(session, entry_id)
    if view is None:
        raise HTTPException(404, f"no entry {entry_id}")
    return EntryOut(
        id=view.id,
        submission=view.submission_id,
        track=track_out(view.track),
        rank=view.rank,
        team=view.team,
        method=view.method,
        description=view.description,
        model=view.model,
        parameters=view.parameters,
        code_url=view.code_url,
        paper_url=view.paper_url,
        created_at=view.created_at,
        episodes=view.episodes,
        intervals=view.intervals,
        families={name: family_out(cells) for name, cells in view.families.items()},
        attempts=view.attempts,
        reproductions=[
            ReproductionOut(
                submission=r.submission_id,
                team=r.team,
                created_at=r.created_at,
                method=r.method,
                model=r.model,
                description=r.description,
                code_url=r.code_url,
                paper_url=r.paper_url,
                self_reported=SelfReported(llm_tokens=r.llm_tokens, wall_time_s=r.wall_time_s),
            )
            for r in view.reproductions
        ],
        self_reported=SelfReported(llm_tokens=view.llm_tokens, wall_time_s=view.wall_time_s),
        bundle=f"/api/entries/{view.id}/bundle",
        page=f"/entries/{view.id}",
    )


@router.get(
    "/entries/{entry_id}/bundle",
    response_class=FileResponse,
    summary="Download the entry's verified bundle (.tar.gz)",
    responses={
        200: {"content": {"application/gzip": {}}, "description": "the bundle as submitted"},
        404: {"description": "no such entry"},
    },
)
def download_bundle(
    entry_id: EntryId, request: Request, session: Annotated[Session, Depends(get_session)]
) -> FileResponse:
    entry = board.get_entry(session, entry_id)
    if entry is None:
        raise HTTPException(404, f"no entry {entry_id}")
    settings: Settings = request.app.state.settings
    path = board.stored_bundle(settings.data_dir, entry.submission.bundle_path)
    if path is None:
        raise HTTPException(404, f"the bundle of entry {entry_id} is not on this server")
    return FileResponse(path, media_type="application/gzip", filename=f"entry-{entry_id}.tar.gz")


@router.get(
    "/export",
    response_class=Response,
    summary="Every verified result as one zip: entries.csv, episodes.csv, SHA256SUMS",
    responses={
        200: {
            "content": {"application/zip": {}},
            "description": "the archive; X-Archive-SHA256 (hex) and Repr-Digest give its sha256",
        }
    },
)
def export(session: Annotated[Session, Depends(get_session)]) -> Response:
    data, sha256 = export_archive(session)
    return Response(
        data,
        media_type="application/zip",
        headers={
            "Content-Disposition": 'attachment; filename="leaderboard-export.zip"',
            "X-Archive-SHA256": sha256,
            "Repr-Digest": f"sha-256=:{base64.b64encode(bytes.fromhex(sha256)).decode()}:",
        },
    )
