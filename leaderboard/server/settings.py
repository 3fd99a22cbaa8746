"""The server's settings: one frozen record, from ``key=value`` arguments.

``python -m leaderboard.server.serve host=127.0.0.1 port=8080 data_dir=leaderboard_data`` (and the
admin CLI) take every option below as ``key=value``; ``--help`` lists them with their defaults.
The data directory holds the uploaded bundles, the SQLite database (unless ``db_url`` names
another database) and the server's secret, the HMAC key of challenge seeds: 32 random bytes in
``<data_dir>/secret``, created on first start with mode 0600 and never shown.
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from leaderboard.core.archive import Limits

SECRET_BYTES = 32
DB_SCHEMES = ("sqlite:///", "postgresql+psycopg://")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


class SettingsError(ValueError):
    """A bad option; the message names the key."""


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class Settings:
    """Everything the server and the admin CLI are configured with (see ``--help``)."""

    host: str = field(default="127.0.0.1", metadata=_help("address to listen on"))
    port: int = field(default=8080, metadata=_help("TCP port to listen on (1-65535)"))
    data_dir: Path = field(
        default=Path("leaderboard_data"),
        metadata=_help("directory of the bundles, the SQLite file and the secret"),
    )
    db_url: str = field(
        default="",
        metadata=_help(
            "database URL, sqlite:///<file> or postgresql+psycopg://user@host:port/db; empty: "
            "the SQLite file <data_dir>/leaderboard.sqlite3"
        ),
    )
    workers: int = field(default=2, metadata=_help("verification worker processes"))
    episode_time_s: float = field(
        default=60.0, metadata=_help("time limit of one episode's verification (seconds)")
    )
    episode_memory_mb: int = field(
        default=2048,
        metadata=_help("memory limit of a verification worker process (MiB of address space)"),
    )
    max_upload_mb: float = field(
        default=32.0, metadata=_help("largest accepted upload (MiB); larger ones get 413")
    )
    max_unpacked_mb: float = field(
        default=64.0, metadata=_help("largest total unpacked size of a bundle (MiB)")
    )
    max_member_mb: float = field(
        default=16.0, metadata=_help("largest unpacked member of a bundle (MiB)")
    )
    max_members: int = field(default=10000, metadata=_help("most members in a bundle"))
    max_ratio: float = field(
        default=200.0, metadata=_help("largest unpacked / compressed size ratio of a bundle")
    )
    max_json_values: int = field(
        default=2_000_000,
        metadata=_help(
            "most JSON values in a bundle, counted before parsing (about 70 bytes of memory "
            "each at worst; the largest reference bundle holds 0.7 million)"
        ),
    )
    challenge_lifetime_h: float = field(
        default=72.0, metadata=_help("hours a challenge stays valid after issue")
    )
    challenge_scenes: int = field(
        default=3,
        metadata=_help(
            "scenes per task of a hidden-seed suite in a challenge (the same for every team)"
        ),
    )
    test_submissions_per_day: int = field(
        default=3, metadata=_help("test-track submissions a team may make in any 24 hours")
    )
    submissions_per_hour: int = field(
        default=60,
        metadata=_help("submissions (any track) a team may make in any hour; 429 past it"),
    )
    challenges_per_day: int = field(
        default=10, metadata=_help("challenges a team may request in any 24 hours; 429 past it")
    )
    log_level: str = field(
        default="warning", metadata=_help(f"server log level, one of {list(LOG_LEVELS)}")
    )
    secret: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        if not self.host:
            raise SettingsError("host: must not be empty")
        if not 1 <= self.port <= 65535:
            raise SettingsError(f"port: {self.port} is not in 1-65535")
        if self.db_url and not self.db_url.startswith(DB_SCHEMES):
            raise SettingsError(f"db_url: {self.db_url!r} must start with one of {DB_SCHEMES}")
        positive = (
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
        for name in positive:
            if not getattr(self, name) > 0:
                raise SettingsError(f"{name}: {getattr(self, name)} must be > 0")
        if self.test_submissions_per_day < 0:
            raise SettingsError(
                f"test_submissions_per_day: {self.test_submissions_per_day} must be >= 0"
            )
        if self.log_level not in LOG_LEVELS:
            raise SettingsError(f"log_level: {self.log_level!r} is not one of {list(LOG_LEVELS)}")
        if len(self.secret) < SECRET_BYTES:
            raise SettingsError(
                f"secret: {len(self.secret)} bytes, at least {SECRET_BYTES} needed (load_settings "
                "reads it from <data_dir>/secret)"
            )

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
    def bundles_dir(self) -> Path:
        """Where uploaded bundles are kept, one file per sha256."""
        return self.data_dir / "bundles"


OPTIONS = tuple(f for f in fields(Settings) if f.name != "secret")


def _convert(name: str, kind: str, value: str) -> Any:
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            out = float(value)
            if out != out or out in (float("inf"), float("-inf")):
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
    kinds = {f.name: str(f.type) for f in OPTIONS}
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
    data_dir = options.get("data_dir", Path(Settings.data_dir).resolve())
    options["data_dir"] = data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    return Settings(**options, secret=load_secret(data_dir))


def usage(prog: str, synopsis: str = "[key=value ...]") -> str:
    """The ``--help`` text: every option with its default and meaning."""
    lines = [f"usage: {prog} {synopsis}", "", "options (key=value):"]
    for f in OPTIONS:
        default = f.default if f.default is not MISSING else ""
        lines.append(f"  {f.name}={default}")
        lines.append(f"      {f.metadata['help']}")
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
