"""``python -m benchmark.play key=value ...``: serve a play session on 127.0.0.1 and print the
address of every seat's page.

Keys: ``task`` (default ``transport_apple_fridge_v0``), ``n_agents`` (2), ``seed`` (0),
``scene`` (chosen by seed), ``humans`` (the agents people play: ``[agent_0]`` or
``agent_0,agent_1``), ``partners`` (a team name, ``heuristic``, or a list of mixed-team members,
``[{baseline: oracle, agents: [agent_1]}]``), ``port`` (0: a free one), ``out`` (where the
finished episode's trace and row are written, ``outputs/play``), and any environment option
(``comm=false``, ``observability=full``, ``token_cap=16``). Values are read as YAML.

``challenge=challenge.json episode=<k>`` plays episode k (from 0) of a leaderboard challenge of
the human-in-the-loop track (suite ``human``): the challenge fixes the task, seed, scene, team
and partner, so those keys are not given. Play every episode into one ``out`` directory, then
``python -m leaderboard.client.pack <out>`` packs it for submission.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import uvicorn
import yaml

from benchmark.env.options import EnvOptions
from benchmark.paths import REPO_ROOT
from benchmark.play.app import create_app
from benchmark.play.session import PlaySession

HOST = "127.0.0.1"
DEFAULTS: dict[str, Any] = {
    "task": "transport_apple_fridge_v0",
    "n_agents": 2,
    "seed": 0,
    "scene": None,
    "humans": ["agent_0"],
    "partners": "heuristic",
    "port": 0,
    "out": str(REPO_ROOT / "outputs" / "play"),
    "challenge": None,
    "episode": 0,
}
# What a challenge fixes.
EPISODE_KEYS = ("task", "n_agents", "seed", "scene", "humans", "partners")


def parse_args(argv: list[str]) -> dict[str, Any]:
    """The settings ``key=value`` arguments give, over :data:`DEFAULTS`; an unknown key or an
    argument without ``=`` is an error naming it and the valid keys."""
    valid = [*DEFAULTS, *EnvOptions.__dataclass_fields__]
    out = dict(DEFAULTS)
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq or key not in valid:
            raise SystemExit(
                f"benchmark.play: bad argument {arg!r}; use key=value with keys {valid}"
            )
        out[key] = yaml.safe_load(value) if value else None
    if isinstance(out["humans"], str):
        out["humans"] = [h.strip() for h in out["humans"].split(",") if h.strip()]
    return out


def _report(session: PlaySession) -> None:
    row = session.row or {}
    outcome = "success" if row.get("SR") else "not completed"
    where = f"; trace: {session.trace_path}" if session.trace_path else ""
    print(f"episode over at tick {session.tick}: {outcome}{where}", flush=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    options = {k: v for k, v in args.items() if k not in DEFAULTS}
    try:
        if args["challenge"]:
            fixed = [k for k in EPISODE_KEYS if args[k] != DEFAULTS[k]]
            if fixed:
                raise ValueError(f"the challenge fixes {fixed}: do not set them")
            session = PlaySession.from_challenge(
                args["challenge"], int(args["episode"]), out_dir=args["out"], **options
            )
        else:
            session = PlaySession(
                str(args["task"]),
                n_agents=int(args["n_agents"]),
                seed=int(args["seed"]),
                humans=args["humans"],
                partners=args["partners"],
                scene=args["scene"],
                out_dir=args["out"],
                **options,
            )
    except ValueError as err:  # a bad task, seat, partner, option or challenge: say which
        raise SystemExit(f"benchmark.play: {err}") from None
    session.on_finish = _report
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, int(args["port"])))
    sock.listen(128)  # connections wait in the backlog from now on, while the server starts
    base = f"http://{HOST}:{sock.getsockname()[1]}"
    print(
        f"{session.info.task} (seed {session.seed}, scene {session.env.episode.scene}): "
        f"{session.info.instruction}"
    )
    for agent, member in session.team.members().items():
        seat = session.seats.get(agent)
        print(f"  {agent}: {f'{base}/seat/{seat.token}' if seat else member}")
    print(f"overview: {base}/  (Ctrl-C stops the server)", flush=True)
    config = uvicorn.Config(create_app(session), log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
