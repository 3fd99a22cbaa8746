"""Migration 0003 on SQLite and on a real PostgreSQL: an entry stored with the board's old
intervals (Wilson bounds for SR, a zero-width Student-t interval for a one-episode family) gets
SR's Clopper-Pearson bounds from its stored successes and n, loses the one-value bounds (keeping
mean and n), and the per-metric intervals label; a summary already in the new form is left as
it is; the downgrade keeps the bounds and gives back the label's old shape."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic import command
from helpers.lb_board import verified
from helpers.lb_db import DATABASES, fresh_engine
from sqlalchemy import Engine, select

from benchmark.metrics.stats import clopper_pearson
from leaderboard.core.ranking import interval_caption
from leaderboard.server.db.models import Entry, Submission, Team
from leaderboard.server.db.session import alembic_config, make_sessions, upgrade

T0 = datetime(2030, 1, 1, tzinfo=UTC)
# What the board stored before 0003 for 4 of 6 successes: Wilson's (0.29998, 0.90324).
OLD = {
    "intervals": {"SR": "Wilson score 95%", "other": "Student-t 95%"},
    "episodes": 6,
    "families": {
        "all": {
            "episodes": 6,
            "SR": {"mean": 4 / 6, "lo": 0.29998, "hi": 0.90324, "n": 6, "successes": 4},
            "L": {"mean": 40.0, "lo": 20.0, "hi": 60.0, "n": 6},
            "speedup": {"mean": None, "lo": None, "hi": None, "n": 0},
            "specialisation": 0.5,
        },
        "prepare": {
            "episodes": 1,
            "SR": {"mean": 1.0, "lo": 0.20655, "hi": 1.0, "n": 1, "successes": 1},
            "L": {"mean": 47.0, "lo": 47.0, "hi": 47.0, "n": 1},
            "speedup": {"mean": 2.0, "lo": 2.0, "hi": 2.0, "n": 1},
            "specialisation": None,
        },
    },
}


@pytest.fixture(params=DATABASES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with fresh_engine(request.param, request, tmp_path) as engine:
        yield engine


def _store(engine: Engine, summaries: list[dict]) -> list[int]:
    """Entries holding ``summaries``, one team and submission each; their ids."""
    ids = []
    with make_sessions(engine)() as session:
        for k, summary in enumerate(summaries):
            team = Team(name=f"team-{k}", created_at=T0)
            submission = Submission(
                team=team,
                track="smoke-v1.n2.comm-on.partial.skill",
                suite="smoke",
                suite_version="v1",
                state="verified",
                reason="",
                bundle_path=f"bundles/{k}.tar.gz",
                bundle_sha256=f"{k:064x}",
                method="m",
                description="",
                model="",
                created_at=T0,
                updated_at=T0,
            )
            entry = Entry(
                submission=submission,
                team=team,
                track=submission.track,
                suite_version="v1",
                summary=summary,
                traces_digest=f"{k:064x}",
                created_at=T0,
            )
            session.add(entry)
            session.flush()
            ids.append(entry.id)
        session.commit()
    return ids


def _summary(engine: Engine, entry_id: int) -> dict:
    with make_sessions(engine)() as session:
        return session.scalars(select(Entry.summary).where(Entry.id == entry_id)).one()


def test_an_old_summary_gets_clopper_pearson_bounds_and_loses_one_value_intervals(
    engine: Engine,
) -> None:
    upgrade(engine, "0002")
    current = verified("heuristic")[2]
    old, new = _store(engine, [copy.deepcopy(OLD), current])
    upgrade(engine)

    migrated = _summary(engine, old)
    every, prepare = migrated["families"]["all"], migrated["families"]["prepare"]
    assert (every["SR"]["lo"], every["SR"]["hi"]) == pytest.approx(clopper_pearson(4, 6))
    assert every["SR"]["mean"] == pytest.approx(4 / 6) and every["SR"]["successes"] == 4
    assert (prepare["SR"]["lo"], prepare["SR"]["hi"]) == pytest.approx((0.025, 1.0))
    assert prepare["L"] == {"mean": 47.0, "lo": None, "hi": None, "n": 1}
    assert prepare["speedup"] == {"mean": 2.0, "lo": None, "hi": None, "n": 1}
    assert every["L"] == OLD["families"]["all"]["L"], "two or more values keep their interval"
    assert every["speedup"] == OLD["families"]["all"]["speedup"]
    assert every["specialisation"] == 0.5 and migrated["episodes"] == 6
    assert migrated["intervals"] == {
        "SR": "Clopper-Pearson 95%",
        "L": "Student-t 95%",
        "speedup": "Student-t 95%",
    }
    assert interval_caption(migrated["intervals"]) == (
        "SR: Clopper-Pearson 95%; every other metric: Student-t 95%"
    )
    assert _summary(engine, new) == current, "a summary the board writes now is left as it is"


def test_the_downgrade_keeps_the_bounds_and_gives_back_the_old_label_shape(
    engine: Engine,
) -> None:
    upgrade(engine, "0002")
    (old,) = _store(engine, [copy.deepcopy(OLD)])
    upgrade(engine)
    upgraded = _summary(engine, old)
    with engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0002")
    downgraded = _summary(engine, old)
    assert downgraded["intervals"] == {"SR": "Clopper-Pearson 95%", "other": "Student-t 95%"}
    assert downgraded["families"] == upgraded["families"]
