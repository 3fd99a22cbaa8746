"""The server's settings: typed ``key=value`` options, errors naming the key, ``--help`` with
every option, and the secret created once with mode 0600."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from leaderboard.server.settings import (
    OPTIONS,
    Settings,
    SettingsError,
    load_settings,
    parse_options,
    settings_from_cli,
)


def test_defaults_put_the_database_and_a_private_secret_in_the_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "board"
    settings = load_settings([f"data_dir={data}"])
    assert (settings.host, settings.port, settings.data_dir) == ("127.0.0.1", 8080, data)
    assert settings.database_url == f"sqlite:///{data / 'leaderboard.sqlite3'}"
    assert settings.bundles_dir == data / "bundles"
    secret = data / "secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    assert settings.secret == secret.read_bytes() and len(settings.secret) == 32
    assert load_settings([f"data_dir={data}"]).secret == settings.secret
    assert load_settings([f"data_dir={tmp_path / 'other'}"]).secret != settings.secret
    assert settings.secret.hex() not in repr(settings)
    assert [p.name for p in data.iterdir()] == ["secret"]


def test_options_are_typed(tmp_path: Path) -> None:
    settings = load_settings(
        [
            f"data_dir={tmp_path}",
            "host=0.0.0.0",
            "port=9000",
            "workers=4",
            "episode_time_s=1.5",
            "max_upload_mb=0.25",
            "db_url=postgresql+psycopg://board@127.0.0.1:5432/board",
            "test_submissions_per_day=0",
        ]
    )
    assert (settings.host, settings.port, settings.workers) == ("0.0.0.0", 9000, 4)
    assert (settings.episode_time_s, settings.max_upload_mb) == (1.5, 0.25)
    assert settings.database_url == "postgresql+psycopg://board@127.0.0.1:5432/board"
    assert settings.test_submissions_per_day == 0
    with pytest.raises(ValidationError, match="frozen"):
        settings.port = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["colour=blue"], "colour: unknown option"),
        (["port"], "'port': expected key=value"),
        (["port=eighty"], "port: 'eighty' is not a finite int"),
        (["port=0"], "port: 0 is not in 1-65535"),
        (["port=70000"], "port: 70000 is not in 1-65535"),
        (["port=1", "port=2"], "port: given twice"),
        (["workers=0"], "workers: 0 must be > 0"),
        (["episode_time_s=nan"], "episode_time_s: 'nan' is not a finite float"),
        (["max_upload_mb=-1"], r"max_upload_mb: -1.0 must be > 0"),
        (["test_submissions_per_day=-1"], "test_submissions_per_day: -1 must be >= 0"),
        (["db_url=mysql://x/y"], "db_url: 'mysql://x/y' must start with one of"),
        (["log_level=loud"], "log_level: 'loud' is not one of"),
        (["partner_population=../x"], "partner_population: '../x': expected the name of a"),
        (["host="], "host: must not be empty"),
        (["data_dir="], "data_dir: must not be empty"),
    ],
)
def test_a_bad_option_is_an_error_naming_its_key(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings([f"data_dir={tmp_path}", *argv] if "data_dir=" not in argv else argv)


def test_help_lists_every_option_with_its_default_and_meaning(
    capsys: pytest.CaptureFixture,
) -> None:
    with pytest.raises(SystemExit) as exit_:
        settings_from_cli(["port=1", "--help"], "python -m leaderboard.server.serve")
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and out.startswith("usage: python -m leaderboard.server.serve")
    assert len(OPTIONS) == len(Settings.model_fields) - 1  # all but the secret
    for option in OPTIONS:
        assert f"  {option.name}={option.default}\n      {option.help}\n" in out + "\n"
    assert "secret=" not in out


def test_the_command_line_reports_a_bad_option_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as exit_:
        settings_from_cli([f"data_dir={tmp_path}", "prot=80"], "serve")
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        f"serve: prot: unknown option; options are {sorted(o.name for o in OPTIONS)}\n"
    )


def test_a_secret_others_can_read_or_too_short_is_refused(tmp_path: Path) -> None:
    load_settings([f"data_dir={tmp_path}"])
    secret = tmp_path / "secret"
    os.chmod(secret, 0o644)
    with pytest.raises(SettingsError, match=r"secret: .* has mode 644; others may read it"):
        load_settings([f"data_dir={tmp_path}"])
    secret.write_bytes(b"short")
    os.chmod(secret, 0o600)
    with pytest.raises(SettingsError, match="holds 5 bytes, at least 32"):
        load_settings([f"data_dir={tmp_path}"])


def test_parsing_alone_touches_nothing(tmp_path: Path) -> None:
    options = parse_options([f"data_dir={tmp_path / 'x'}", "port=81"])
    assert options == {"data_dir": tmp_path / "x", "port": 81}
    assert not (tmp_path / "x").exists()
    with pytest.raises(SettingsError, match="secret: 0 bytes, at least 32"):
        Settings()


def test_options_come_from_the_environment_and_an_argument_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEADERBOARD_PORT", "9100")
    monkeypatch.setenv("LEADERBOARD_DATA_DIR", str(tmp_path / "from-env"))
    settings = load_settings([])
    assert settings.port == 9100 and settings.data_dir == tmp_path / "from-env"
    assert (tmp_path / "from-env" / "secret").is_file()
    assert load_settings(["port=9200"]).port == 9200
    monkeypatch.setenv("LEADERBOARD_WORKERS", "0")
    with pytest.raises(SettingsError, match=r"workers: 0 must be > 0 \(from the environment"):
        load_settings([])
