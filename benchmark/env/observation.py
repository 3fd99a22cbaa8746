"""What an agent observes: a structured dict for programmatic agents and the same content as
text for LLM agents, with the gymnasium spaces that contain them."""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

from benchmark.env.messaging import Message, printable
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import World

CHARSET = frozenset(string.printable)
MAX_TEXT = 32_000
MAX_ACTION_TEXT = 2_000


def text_space(max_length: int = MAX_TEXT) -> spaces.Text:
    return spaces.Text(max_length=max_length, min_length=0, charset="".join(sorted(CHARSET)))


def observation_space() -> spaces.Dict:
    """The space of one agent's observation (the same for every agent)."""
    small = text_space(400)
    return spaces.Dict(
        {
            "text": text_space(),
            "instruction": text_space(4_000),
            "tick": spaces.Box(0, np.iinfo(np.int64).max, shape=(), dtype=np.int64),
            "needs_decision": spaces.Discrete(2),
            "pose": spaces.Box(-1e4, 1e4, shape=(4,), dtype=np.float64),
            "holding": small,
            "visible": spaces.Sequence(
                spaces.Dict(
                    {
                        "objectId": small,
                        "objectType": small,
                        "distance": spaces.Box(0.0, 1e4, shape=(), dtype=np.float64),
                        "state": small,
                        "in": small,
                    }
                )
            ),
            "messages": spaces.Sequence(
                spaces.Dict(
                    {
                        "sender": small,
                        "text": text_space(4_000),
                        "truncated": spaces.Discrete(2),
                    }
                )
            ),
            "last_action": text_space(MAX_ACTION_TEXT),
            "last_success": spaces.Discrete(2),
            "feedback": text_space(2_000),
        }
    )


def action_space() -> spaces.Text:
    """Actions are text in the skill (or primitive) grammar."""
    return text_space(MAX_ACTION_TEXT)


def object_state(world: World, index: int) -> str:
    """Short state words: open/closed, on/off, sliced, cooked, dirty, filled."""
    spec, st = world.specs[index], world.objs[index]
    words = []
    if spec.openable:
        words.append("open" if st.is_open else "closed")
    if spec.toggleable:
        words.append("on" if st.is_toggled else "off")
    if st.is_sliced:
        words.append("sliced")
    if st.is_cooked:
        words.append("cooked")
    if st.is_dirty:
        words.append("dirty")
    if st.is_filled:
        words.append(f"filled with {st.fill_liquid or 'liquid'}")
    return ", ".join(words)


def build(
    world: World,
    agent: int,
    name: str,
    instruction: str,
    tick: int,
    needs_decision: bool,
    visible: list[int],
    messages: list[Message],
    last_action: str,
    last_success: bool,
    feedback: str,
) -> dict[str, Any]:
    """One agent's observation dict, including its text rendering under ``text``."""
    a = world.agents[agent]
    held = world.specs[a.held].object_id if a.held >= 0 else ""
    seen = []
    for k in visible:
        parent = world.objs[k].parent
        seen.append(
            {
                "objectId": world.specs[k].object_id,
                "objectType": world.specs[k].object_type,
                "distance": np.array(round(world.distance(agent, k), 2), dtype=np.float64),
                "state": object_state(world, k),
                "in": world.specs[parent].object_id if parent >= 0 else "",
            }
        )
    inbox = [{"sender": m.sender, "text": m.text, "truncated": int(m.truncated)} for m in messages]
    pose = np.array([a.i * GRID_SIZE, a.j * GRID_SIZE, float(a.rotation), float(a.horizon)])
    lines = [
        f"You are {name}. Task: {instruction}",
        f"Tick {tick}. You stand at x={pose[0]:.2f}, z={pose[1]:.2f}, facing {a.rotation} degrees, "
        f"looking {a.horizon:+.0f} degrees.",
        f"You hold: {held or 'nothing'}.",
        f"Last action: {last_action or 'none'} -> {'ok' if last_success else 'FAILED'}: {feedback}",
        "You see:" if seen else "You see nothing you can interact with.",
    ]
    for o in seen:
        extra = f" [{o['state']}]" if o["state"] else ""
        where = f" in {o['in']}" if o["in"] else ""
        lines.append(
            f"  - {o['objectId']} ({o['objectType']}, {float(o['distance']):.1f} m){extra}{where}"
        )
    for m in inbox:
        flag = " (truncated)" if m["truncated"] else ""
        lines.append(f"Message from {m['sender']}{flag}: {m['text']}")
    if needs_decision:
        lines.append("Choose your next action.")
    text = printable("\n".join(lines))[:MAX_TEXT]
    return {
        "text": text,
        "instruction": printable(instruction)[:4_000],
        "tick": np.array(tick, dtype=np.int64),
        "needs_decision": int(needs_decision),
        "pose": pose,
        "holding": held,
        "visible": tuple(seen),
        "messages": tuple(inbox),
        "last_action": printable(last_action)[:MAX_ACTION_TEXT],
        "last_success": int(last_success),
        "feedback": printable(feedback)[:2_000],
    }
