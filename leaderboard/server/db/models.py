"""The leaderboard's tables (SQLAlchemy 2 declarative models).

- ``teams`` and their ``tokens`` (only a token's sha256 is stored; a revoked token keeps its
  row with ``revoked_at`` set);
- ``challenges``: the episodes of the hidden-seed test track issued to a team, with an expiry;
  a challenge is answered by at most one submission (``submissions.challenge_id`` is unique);
- ``submissions``: an uploaded bundle for one track and its verification state
  (``queued -> verifying -> verified | rejected``), the reason of a rejection, the fields of its
  ``submission.yaml`` (self-reported resource figures included, as reported), and
  ``episode_results``: per episode whether it verified, why not, the recomputed metrics and
  the trace's hash;
- ``entries``: the ranked results, one per verified submission that is not a reproduction of
  an earlier entry of the same track (same run-episode traces, ``traces_digest``). A
  submission holding some of another team's entry's traces gets none (it is rejected).

Timestamps are timezone-aware UTC in Python on every database. Track keys are the strings of
``leaderboard.core.tracks.Track.key``; tables of different tracks (and suite versions) never mix.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

TEAM_NAME_MAX = 64
TRACK_KEY_MAX = 200
EPISODE_KEY_MAX = 500
STATES = ("queued", "verifying", "verified", "rejected")

# Every constraint and index gets a deterministic name, the same on SQLite and PostgreSQL, so
# migrations can refer to them.
NAMING = {
    "ix": "ix_%(column_0_N_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime. SQLite keeps no zone, so the UTC wall time is stored
    there and the zone restored on reading; naive datetimes are refused."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: give a timezone-aware one")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {  # noqa: RUF012 (SQLAlchemy reads this class attribute)
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
    }


class Team(Base):
    __tablename__ = "teams"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(TEAM_NAME_MAX), unique=True)
    created_at: Mapped[datetime]

    tokens: Mapped[list[Token]] = relationship(back_populates="team", order_by="Token.id")


class Token(Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), index=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]

    team: Mapped[Team] = relationship(back_populates="tokens")


class Challenge(Base):
    __tablename__ = "challenges"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), index=True)
    suite: Mapped[str] = mapped_column(String(64))
    suite_version: Mapped[str] = mapped_column(String(32))
    issued_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    episodes: Mapped[list[Any]]  # [{task, scene, seed, n_agents[, partner]}, ...]

    team: Mapped[Team] = relationship()
    submission: Mapped[Submission | None] = relationship(back_populates="challenge")


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (
        CheckConstraint(f"state IN {STATES!r}", name="state"),
        Index("ix_submissions_team_id_created_at", "team_id", "created_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"))
    track: Mapped[str] = mapped_column(String(TRACK_KEY_MAX), index=True)
    suite: Mapped[str] = mapped_column(String(64))
    suite_version: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str] = mapped_column(Text)
    bundle_path: Mapped[str] = mapped_column(String(1000))
    bundle_sha256: Mapped[str] = mapped_column(String(64), index=True)
    challenge_id: Mapped[str | None] = mapped_column(ForeignKey("challenges.id"), unique=True)
    # The earlier submission whose entry this one reproduces (identical run-episode traces).
    reproduction_of_id: Mapped[int | None] = mapped_column(ForeignKey("submissions.id"), index=True)
    method: Mapped[str] = mapped_column(String(100))
    description: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(200))
    parameters: Mapped[int | None] = mapped_column(BigInteger)
    code_url: Mapped[str | None] = mapped_column(String(500))
    paper_url: Mapped[str | None] = mapped_column(String(500))
    llm_tokens: Mapped[int | None] = mapped_column(BigInteger)  # self-reported
    wall_time_s: Mapped[float | None]  # self-reported
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    team: Mapped[Team] = relationship()
    challenge: Mapped[Challenge | None] = relationship(back_populates="submission")
    episodes: Mapped[list[EpisodeResult]] = relationship(
        back_populates="submission", order_by="EpisodeResult.id"
    )
    entry: Mapped[Entry | None] = relationship(back_populates="submission")
    reproduction_of: Mapped[Submission | None] = relationship(remote_side=[id])


class EpisodeResult(Base):
    __tablename__ = "episode_results"
    __table_args__ = (UniqueConstraint("submission_id", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"))
    key: Mapped[str] = mapped_column(String(EPISODE_KEY_MAX))  # the bundle row's key
    ok: Mapped[bool]
    reasons: Mapped[list[Any]]  # [str, ...], each naming the field
    metrics: Mapped[dict[str, Any]]  # recomputed by the server; empty when not ok
    # Indexed: a verdict looks up which entries already hold each of its traces.
    trace_hash: Mapped[str] = mapped_column(String(64), index=True)

    submission: Mapped[Submission] = relationship(back_populates="episodes")


class Entry(Base):
    __tablename__ = "entries"
    __table_args__ = (UniqueConstraint("track", "traces_digest"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), unique=True)
    team_id: Mapped[int] = mapped_column(ForeignKey("teams.id"), index=True)
    track: Mapped[str] = mapped_column(String(TRACK_KEY_MAX), index=True)
    suite_version: Mapped[str] = mapped_column(String(32))
    summary: Mapped[dict[str, Any]]  # leaderboard.core.ranking.entry_summary of the episodes
    # sha256 of the sorted run-episode trace hashes: equal digests, identical traces.
    traces_digest: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]

    submission: Mapped[Submission] = relationship(back_populates="entry")
    team: Mapped[Team] = relationship()
