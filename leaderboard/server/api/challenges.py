"""``POST /api/challenges``: the episodes of a hidden-seed test suite, drawn for one team, at
most ``challenges_per_day`` in any 24 hours (429 past it, concurrent requests included:
:func:`leaderboard.server.services.challenges.issue`).

The answer is the challenge file that ``python -m benchmark.run suite=test
challenge=challenge.json`` runs; a submission answering it names its id in the manifest (and
every trace records it). See :mod:`leaderboard.core.challenges` for how the seeds are drawn. On
a suite with a focal seat each episode also names its ``partner``; its episodes are run with
``python -m benchmark.run suite=crossplay challenge=challenge.json baseline=<team>`` or played
with ``python -m benchmark.play challenge=challenge.json episode=<k>`` (suite ``human``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from leaderboard.core.untrusted import RepeatedKey, unique_keys
from leaderboard.server import crud
from leaderboard.server.api.deps import get_session
from leaderboard.server.auth import TeamIdentity, current_team
from leaderboard.server.services import challenges
from leaderboard.server.settings import Settings

router = APIRouter(prefix="/api/challenges", tags=["challenges"])


class ChallengeRequest(BaseModel):
    suite: str = Field(default="test", max_length=64, description="a hidden-seed suite")


class PartnerOut(BaseModel):
    label: str
    baseline: str
    kwargs: dict[str, Any]


class ChallengeEpisodeOut(BaseModel):
    task: str
    scene: str
    seed: int
    n_agents: int
    partner: PartnerOut | None = Field(
        default=None, description="the member that plays every agent but agent_0 (focal seats)"
    )


class ChallengeOut(BaseModel):
    format: int
    id: str
    suite: str
    suite_version: str
    team: str
    expires: str
    episodes: list[ChallengeEpisodeOut]


async def no_repeated_keys(request: Request) -> None:
    """Refuse (422) a JSON body that repeats a key, as every JSON the server reads; other
    malformed bodies are left to the body's own validation."""
    try:
        json.loads(await request.body(), object_pairs_hook=unique_keys)
    except RepeatedKey as err:
        raise crud.Refused(422, f"body: {err}") from None
    except ValueError:
        pass


@router.post(
    "",
    status_code=201,
    response_model=ChallengeOut,
    summary="Draw a challenge: the test episodes this team must run and submit",
    dependencies=[Depends(no_repeated_keys)],
)
def new_challenge(
    body: ChallengeRequest,
    request: Request,
    team: Annotated[TeamIdentity, Depends(current_team)],
    session: Annotated[Session, Depends(get_session)],
) -> dict[str, Any]:
    settings: Settings = request.app.state.settings
    return challenges.issue(session, team.id, team.name, body.suite, settings).to_json()
