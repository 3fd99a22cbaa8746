"""The server's settings: one frozen pydantic-settings record, from ``key=value`` arguments and
``LEADERBOARD_<KEY>`` environment variables (an argument wins over the environment).

``python -m leaderboard.server.serve host=127.0.0.1 port=8080 data_dir=leaderboard_data`` (and
the admin CLI) take every option below as ``key=value``; ``--help`` lists them with their
defaults. The data directory holds the uploaded bundles, the SQLite database (unless ``db_url``
names another database) and the server's secret, the HMAC key of challenge seeds: 32 random
bytes in ``<data_dir>/secret``, created on first start with mode 0600 and never shown.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import stat
import sys
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from leaderboard.core.archive import Limits

SECRET_BYTES = 32
DB_SCHEMES = ("sqlite:///", "postgresql+psycopg://")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
ENV_PREFIX = "LEADERBOARD_"
POSITIVE = (
    "workers",
    "episode_time_s",
    "episode_memory_mb",
    "max_upload_mb",
    "max_unpacked_mb",
    "max_member_mb",
    "max_members",
    "max_ratio",
    "max_json_values",
    "challenge_lifetime_h",
    "challenge_scenes",
    "submissions_per_hour",
    "challenges_per_day",
)


class SettingsError(ValueError):
    """A bad option; the message names the key."""


class Settings(BaseSettings):
    """Everything the server and the admin CLI are configured with (see ``--help``)."""

    model_config = SettingsConfigDict(
        frozen=True, extra="forbid", env_prefix=ENV_PREFIX, validate_default=True
    )

    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(8080, description="TCP port to listen on (1-65535)")
    data_dir: Path = Field(
        Path("leaderboard_data"),
        description="directory of the bundles, the SQLite file and the secret",
    )
    db_url: str = Field(
        "",
        description=(
            "database URL, sqlite:///<file> or postgresql+psycopg://user@host:port/db; empty: "
            "the SQLite file <data_dir>/leaderboard.sqlite3"
        ),
    )
    workers: int = Field(2, description="verification worker processes")
    episode_time_s: float = Field(
        60.0, description="time limit of one episode's verification (seconds)"
    )
    episode_memory_mb: int = Field(
        2048, description="memory limit of a verification worker process (MiB of address space)"
    )
    max_upload_mb: float = Field(
        32.0, description="largest accepted upload (MiB); larger ones get 413"
    )
    max_unpacked_mb: float = Field(
        64.0, description="largest total unpacked size of a bundle (MiB)"
    )
    max_member_mb: float = Field(16.0, description="largest unpacked member of a bundle (MiB)")
    max_members: int = Field(10000, description="most members in a bundle")
    max_ratio: float = Field(
        200.0, description="largest unpacked / compressed size ratio of a bundle"
    )
    max_json_values: int = Field(
        2_000_000,
        description=(
            "most JSON values in a bundle, counted before parsing (about 70 bytes of memory "
            "each at worst; the largest reference bundle holds 0.7 million)"
        ),
    )
    challenge_lifetime_h: float = Field(
        72.0, description="hours a challenge stays valid after issue"
    )
    challenge_scenes: int = Field(
        3,
        description=(
            "scenes per task of a hidden-seed suite in a challenge (the same for every team)"
        ),
    )
    partner_population: str = Field(
        "heldout",
        description=(
            "the partner population (configs/partners/<name>.yaml) whose members challenges "
            "of suites with a focal seat (cross-play, human) assign to the other agents"
        ),
    )
    partner_labels: str = Field(
        "",
        description=(
            "the members of partner_population to assign, comma-separated labels; empty: every "
            "member verification can re-run (deterministic scripted teams). A named member it "
            "cannot re-run is refused when a challenge is issued"
        ),
    )
    test_submissions_per_day: int = Field(
        3, description="test-track submissions a team may make in any 24 hours"
    )
    submissions_per_hour: int = Field(
        60, description="submissions (any track) a team may make in any hour; 429 past it"
    )
    challenges_per_day: int = Field(
        10, description="challenges a team may request in any 24 hours; 429 past it"
    )
    log_level: str = Field("warning", description=f"server log level, one of {list(LOG_LEVELS)}")
    secret: bytes = Field(b"", repr=False, exclude=True)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise SettingsError(_first_error(err)) from None

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not value:
            raise ValueError("must not be empty")
        return value

    @field_validator("partner_population")
    @classmethod
    def _population(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]+", value):
            raise ValueError(f"{value!r}: expected the name of a configs/partners file")
        return value

    @field_validator("port")
    @classmethod
    def _port(cls, value: int) -> int:
        if not 1 <= value <= 65535:
            raise ValueError(f"{value} is not in 1-65535")
        return value

    @field_validator("db_url")
    @classmethod
    def _db_url(cls, value: str) -> str:
        if value and not value.startswith(DB_SCHEMES):
            raise ValueError(f"{value!r} must start with one of {DB_SCHEMES}")
        return value

    @field_validator(*POSITIVE)
    @classmethod
    def _positive(cls, value: float) -> float:
        if not value > 0 or not math.isfinite(value):
            raise ValueError(f"{value} must be > 0")
        return value

    @field_validator("test_submissions_per_day")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise ValueError(f"{value} must be >= 0")
        return value

    @field_validator("log_level")
    @classmethod
    def _log_level(cls, value: str) -> str:
        if value not in LOG_LEVELS:
            raise ValueError(f"{value!r} is not one of {list(LOG_LEVELS)}")
        return value

    @field_validator("secret")
    @classmethod
    def _secret(cls, value: bytes) -> bytes:
        if len(value) < SECRET_BYTES:
            raise ValueError(
                f"{len(value)} bytes, at least {SECRET_BYTES} needed (load_settings reads it "
                "from <data_dir>/secret)"
            )
        return value

    @property
    def database_url(self) -> str:
        """``db_url``, or the SQLite file in the data directory when it is empty."""
        return self.db_url or f"sqlite:///{self.data_dir / 'leaderboard.sqlite3'}"

    @property
    def bundle_limits(self) -> Limits:
        """What an uploaded bundle may take (:class:`leaderboard.core.archive.Limits`)."""
        mib = 1 << 20
        return Limits(
            max_bytes=int(self.max_upload_mb * mib),
            max_unpacked_bytes=int(self.max_unpacked_mb * mib),
            max_member_bytes=int(self.max_member_mb * mib),
            max_members=self.max_members,
            max_ratio=self.max_ratio,
            max_json_values=self.max_json_values,
        )

    @property
    def partner_label_list(self) -> tuple[str, ...]:
        """``partner_labels`` as a tuple (empty: every member that can be re-run)."""
        return tuple(label.strip() for label in self.partner_labels.split(",") if label.strip())

    @property
    def bundles_dir(self) -> Path:
        """Where uploaded bundles are kept, one file per sha256."""
        return self.data_dir / "bundles"


def _first_error(err: ValidationError) -> str:
    """The first problem of a validation error as ``key: what is wrong`` (an environment
    variable's problem names the variable too)."""
    first = err.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "settings"
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = f"unknown option; options are {sorted(o.name for o in OPTIONS)}"
    env = ENV_PREFIX + key.upper()
    if env in os.environ and first["type"] != "extra_forbidden":
        message += f" (from the environment variable {env})"
    return f"{key}: {message}"


class Option(NamedTuple):
    """One command-line option: its name, default, Python type's name and meaning."""

    name: str
    default: Any
    kind: str
    help: str


OPTIONS = tuple(
    Option(
        name,
        info.default,
        getattr(info.annotation, "__name__", str(info.annotation)),
        info.description or "",
    )
    for name, info in Settings.model_fields.items()
    if name != "secret"
)


def _convert(name: str, kind: str, value: str) -> Any:
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            out = float(value)
            if not math.isfinite(out):
                raise ValueError(value)
            return out
    except ValueError:
        raise SettingsError(f"{name}: {value!r} is not a finite {kind}") from None
    if kind == "Path":
        if not value:
            raise SettingsError(f"{name}: must not be empty")
        return Path(value).expanduser().resolve()
    return value


def parse_options(argv: list[str]) -> dict[str, Any]:
    """The options among ``argv`` (``key=value`` items) as typed values; raises SettingsError
    naming the key of an unknown option, a repeated one or a bad value."""
    kinds = {o.name: o.kind for o in OPTIONS}
    out: dict[str, Any] = {}
    for item in argv:
        key, sep, value = item.partition("=")
        if not sep:
            raise SettingsError(f"{item!r}: expected key=value")
        if key not in kinds:
            raise SettingsError(f"{key}: unknown option; options are {sorted(kinds)}")
        if key in out:
            raise SettingsError(f"{key}: given twice")
        out[key] = _convert(key, kinds[key], value)
    return out


def load_secret(data_dir: Path) -> bytes:
    """The server's secret in ``data_dir/secret``, created (random, mode 0600) when missing.
    A secret file that others may read, or that is too short, is refused."""
    path = data_dir / "secret"
    if not path.exists():
        tmp = data_dir / f".secret.{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(SECRET_BYTES))
        try:
            os.link(tmp, path)  # atomic, and never replaces a secret another process created
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise SettingsError(f"secret: {path} has mode {mode:o}; others may read it (chmod 600)")
    data = path.read_bytes()
    if len(data) < SECRET_BYTES:
        raise SettingsError(f"secret: {path} holds {len(data)} bytes, at least {SECRET_BYTES}")
    return data


def load_settings(argv: list[str]) -> Settings:
    """Settings from ``key=value`` arguments; creates the data directory and the secret."""
    options = parse_options(argv)
    from_env = os.environ.get(ENV_PREFIX + "DATA_DIR")
    default = Path(from_env) if from_env else Settings.model_fields["data_dir"].default
    data_dir = options.get("data_dir", Path(default).expanduser().resolve())
    options["data_dir"] = data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    return Settings(**options, secret=load_secret(data_dir))


def usage(prog: str, synopsis: str = "[key=value ...]") -> str:
    """The ``--help`` text: every option with its default and meaning."""
    lines = [f"usage: {prog} {synopsis}", "", "options (key=value):"]
    for option in OPTIONS:
        lines.append(f"  {option.name}={option.default}")
        lines.append(f"      {option.help}")
    lines += [
        "",
        f"Each option can also come from the environment: {ENV_PREFIX}<KEY> (upper case).",
    ]
    return "\n".join(lines)


def settings_from_cli(argv: list[str], prog: str, synopsis: str = "[key=value ...]") -> Settings:
    """:func:`load_settings` for a command line: ``--help`` prints :func:`usage` and exits 0,
    a bad option exits 2 with one line naming it."""
    if "--help" in argv or "-h" in argv:
        print(usage(prog, synopsis))
        raise SystemExit(0)
    try:
        return load_settings(argv)
    except SettingsError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        raise SystemExit(2) from None
