"""Episode media: a top-down GIF of every tick and an ``episode.html`` viewer beside it.

Both come from replaying the trace, so they show exactly what was recorded. Everything written
into the page is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

from benchmark.env.replay import env_from_trace
from benchmark.sim.render import top_down
from benchmark.sim.world import World

Drawn = TypeVar("Drawn")


def replay_worlds(
    trace: dict[str, Any],
    draw: Callable[[World, int], Drawn],
    ticks: Collection[int] | None = None,
) -> list[Drawn]:
    """Replay the traced episode and ``draw(world, t)`` the world after ``t`` ticks (``t = 0``:
    the start) for every ``t`` in ``ticks`` (every tick when None), in order of ``t``. The
    replay stops once the last tick asked for is drawn; ``draw`` must not change the world."""
    env = env_from_trace(trace)
    last = None if ticks is None else max(ticks, default=-1)
    out: list[Drawn] = []
    done = [0]

    def on_tick(world: World) -> None:
        done[0] += 1
        if ticks is None or done[0] in ticks:
            out.append(draw(world, done[0]))

    if ticks is None or 0 in ticks:
        out.append(draw(env.world, 0))
    for step in trace["decisions"]:
        if not env.agents or (last is not None and done[0] >= last):
            break
        env.step(step["actions"], on_tick=on_tick, observe=False)
    return out


def replay_frames(trace: dict[str, Any], pixels_per_metre: int = 40) -> list:
    """One top-down image at the start and after every tick of the traced episode."""
    return replay_worlds(trace, lambda world, _: top_down(world, pixels_per_metre=pixels_per_metre))


def checklist_states(trace: dict[str, Any]) -> list[tuple[bool, ...]]:
    """Which checklist atoms hold after each tick of the trace: ``final.ticks + 1`` tuples
    (index ``t``: after ``t`` ticks), read from its initial state and its atom changes."""
    state = [bool(s) for s in trace["initially_satisfied"]]
    changes: dict[int, list[dict[str, Any]]] = {}
    for change in trace["atoms"]:
        changes.setdefault(change["tick"], []).append(change)
    out = [tuple(state)]
    for t in range(trace["final"]["ticks"]):
        for change in changes.get(t, ()):
            state[change["atom"]] = bool(change["satisfied"])
        out.append(tuple(state))
    return out


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape('' if c is None else str(c))}</td>" for c in row)
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_episode_media(trace: dict[str, Any], out_dir: Path, ms_per_frame: int = 150) -> Path:
    """Write ``episode.gif`` and ``episode.html`` into ``out_dir``; returns the HTML path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = replay_frames(trace)
    gif = out_dir / "episode.gif"
    frames[0].save(
        gif, format="GIF", save_all=True, append_images=frames[1:], duration=ms_per_frame, loop=0
    )
    agents = [f"agent_{k}" for k in range(trace["config"]["n_agents"])]
    tick_rows = [
        [
            t,
            *[
                f"{c[2] or ''}: {c[0] or '-'}{' (blocked)' if c[3] else ''}"
                f"{'' if c[1] is None else (' ok' if c[1] else ' FAILED')}"
                for c in row
            ],
        ]
        for t, row in enumerate(trace["ticks"])
    ]
    decisions = [
        [d["tick"], a, text] for d in trace["decisions"] for a, text in d["actions"].items()
    ]
    messages = [
        [
            m["tick"],
            m["sender"],
            ", ".join(m["recipients"]),
            m["text"],
            "yes" if m["truncated"] else "",
            "yes" if m["delivered"] else "no",
        ]
        for m in trace["messages"]
    ]
    checklist = [
        [atom["key"], "yes" if ok else "no"]
        for atom, ok in zip(trace["checklist"], trace["final"]["satisfied"], strict=True)
    ]
    data = base64.b64encode(gif.read_bytes()).decode()
    cfg = trace["config"]
    title = html.escape(
        f"{cfg['task']} in {cfg['scene']}, {cfg['n_agents']} agents, seed {cfg['seed']}"
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:1em}}
.cols{{display:flex;gap:2em;align-items:flex-start}}
table{{border-collapse:collapse;font-size:12px}} td,th{{border:1px solid #ccc;padding:2px 6px}}
.scroll{{max-height:80vh;overflow:auto}}</style></head>
<body><h1>{title}</h1>
<p>Instruction: {html.escape(trace["instruction"])}<br>
Success: {html.escape(str(trace["final"]["success"]))}, ticks: {trace["final"]["ticks"]},
trace hash: <code>{html.escape(trace["trace_hash"])}</code></p>
<div class="cols"><div><img src="data:image/gif;base64,{data}" alt="top-down replay">
<h2>Checklist</h2>{_table(["atom", "satisfied"], checklist)}
<h2>Messages</h2>{_table(["tick", "from", "to", "text", "truncated", "delivered"], messages)}</div>
<div class="scroll"><h2>Ticks</h2>{_table(["tick", *agents], tick_rows)}
<h2>Decisions</h2>{_table(["tick", "agent", "action"], decisions)}</div></div>
</body></html>
"""
    path = out_dir / "episode.html"
    path.write_text(page)
    return path
