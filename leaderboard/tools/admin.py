"""``python -m leaderboard.tools.admin COMMAND [ARG] [key=value ...]``: manage teams and tokens.

Commands:
  create-team NAME   create a team and print its token, once, alone on the last line
  issue-token TEAM   print a new token for TEAM (alone on the last line)
  revoke-token TEAM  revoke every active token of TEAM
  list-teams         every team with its number of active tokens

The ``key=value`` options are the server's (``data_dir``, ``db_url``, ...; see ``--help``); the
database's schema is upgraded to the newest revision first. Only a token's sha256 is stored: a
lost token cannot be shown again, only revoked and replaced.
"""

from __future__ import annotations

import sys

from sqlalchemy.orm import Session

from leaderboard.server import auth, crud
from leaderboard.server.db.session import make_engine, make_sessions, upgrade
from leaderboard.server.settings import settings_from_cli

PROG = "python -m leaderboard.tools.admin"
SYNOPSIS = "{create-team NAME | issue-token TEAM | revoke-token TEAM | list-teams} [key=value ...]"
TAKES_NAME = ("create-team", "issue-token", "revoke-token")
COMMANDS = (*TAKES_NAME, "list-teams")


def _team(session: Session, name: str) -> int:
    team = crud.team_by_name(session, name)
    if team is None:
        raise crud.Refused(404, f"no team named {name!r}")
    return team.id


def run(session: Session, command: str, name: str = "") -> list[str]:
    """Carry out ``command`` (on team ``name``); returns the lines to print, a token last."""
    if command == "list-teams":
        lines = [f"{'id':>4}  {'active tokens':>13}  {'created (UTC)':<19}  name"]
        for team in crud.list_teams(session):
            active = sum(t.revoked_at is None for t in team.tokens)
            created = team.created_at.strftime("%Y-%m-%d %H:%M:%S")
            lines.append(f"{team.id:>4}  {active:>13}  {created:<19}  {team.name}")
        return lines
    if command == "create-team":
        team = crud.create_team(session, name)
        token = auth.issue_token(session, team.id)
        return [f"created team {team.name!r} (id {team.id}); its token, shown only now:", token]
    if command == "issue-token":
        token = auth.issue_token(session, _team(session, name))
        return [f"a new token of team {name!r}, shown only now:", token]
    if command == "revoke-token":
        count = crud.revoke_tokens(session, _team(session, name))
        return [f"revoked {count} token(s) of team {name!r}"]
    raise ValueError(f"unknown command {command!r}; commands are {list(COMMANDS)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        if argv and argv[0] in ("-h", "--help"):
            settings_from_cli(["--help"], PROG, SYNOPSIS)
        got = repr(argv[0]) if argv else "nothing"
        print(f"{PROG}: expected a command, one of {list(COMMANDS)}; got {got}", file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    name = ""
    if command in TAKES_NAME:
        # The name is taken verbatim (it may hold '='); the options follow it.
        if not rest or rest[0] in ("-h", "--help"):
            if rest:
                settings_from_cli(["--help"], PROG, SYNOPSIS)
            print(f"{PROG}: {command} needs a team name", file=sys.stderr)
            return 2
        name, rest = rest[0], rest[1:]
    settings = settings_from_cli(rest, PROG, SYNOPSIS)
    engine = make_engine(settings.database_url)
    try:
        upgrade(engine)
        with make_sessions(engine)() as session:
            lines = run(session, command, name)
    except crud.Refused as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
