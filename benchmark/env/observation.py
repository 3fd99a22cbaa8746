"""What an agent observes: a structured dict for programmatic agents and the same content as
text for LLM agents, with the gymnasium spaces that contain them.

Each visible object's entry holds its ``objectId``, ``objectType``, ``distance`` (metres),
``state`` words and ``in`` (the receptacle it rests in directly, or ""). In episodes of tasks
whose goal has an ``inside(X, @home)`` clause every entry also holds ``belongs``: the goal
objects (sorted objectIds) whose recorded home it is and that are elsewhere now, empty for the
rest (:mod:`benchmark.env.homes`); the text adds ``belongs here: <ids>`` to that object's line.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from benchmark.env.messaging import Message, printable
from benchmark.env.skills import Skill, is_permanent
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.world import World

CHARSET = frozenset(string.printable)
MAX_TEXT = 32_000
MAX_ACTION_TEXT = 2_000


@dataclass(frozen=True)
class LastAction:
    """The outcome of an agent's last action, as its next observation reports it.

    Attributes:
        text: the action text it sent.
        success, feedback: whether it worked, and the feedback sentence.
        reason: why it failed (a simulator Failure or a SkillFailure value; "" on success).
        permanent: the same action would fail again whatever happens (no use retrying).
        other_agent: the agent involved in the failure (holding the target, in the way), or "".
    """

    text: str = ""
    success: bool = True
    feedback: str = "episode started"
    reason: str = ""
    permanent: bool = False
    other_agent: str = ""

    @classmethod
    def of(cls, text: str, skill: Skill, agents: list[str]) -> LastAction:
        """The outcome of ``skill``, started by the action ``text`` (no feedback yet while it
        runs)."""
        if not skill.finished and not skill.rejected:
            return cls(text, feedback="")
        other = skill.other_agent
        return cls(
            text,
            skill.success,
            skill.feedback,
            skill.reason,
            bool(skill.reason) and is_permanent(skill.reason),
            agents[other] if 0 <= other < len(agents) else "",
        )


def text_space(max_length: int = MAX_TEXT) -> spaces.Text:
    return spaces.Text(max_length=max_length, min_length=0, charset="".join(sorted(CHARSET)))


def observation_space(homes: bool = False) -> spaces.Dict:
    """The space of one agent's observation (the same for every agent); with ``homes`` the
    visible entries hold ``belongs`` (tasks with ``@home`` clauses: see the module docstring)."""
    small = text_space(400)
    entry = {
        "objectId": small,
        "objectType": small,
        "distance": spaces.Box(0.0, 1e4, shape=(), dtype=np.float64),
        "state": small,
        "in": small,
    }
    if homes:
        entry["belongs"] = spaces.Sequence(small)
    return spaces.Dict(
        {
            "text": text_space(),
            "instruction": text_space(4_000),
            "tick": spaces.Box(0, np.iinfo(np.int64).max, shape=(), dtype=np.int64),
            "needs_decision": spaces.Discrete(2),
            "pose": spaces.Box(-1e4, 1e4, shape=(4,), dtype=np.float64),
            "holding": small,
            "visible": spaces.Sequence(spaces.Dict(entry)),
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
            "failure": spaces.Dict(
                {"reason": small, "permanent": spaces.Discrete(2), "agent": small}
            ),
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
    last: LastAction,
    belongs: Mapping[int, tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """One agent's observation dict, including its text rendering under ``text``. With
    ``belongs`` (receptacle index -> objectIds that belong in it and are elsewhere now) every
    visible entry holds a ``belongs`` field; None leaves it out."""
    a = world.agents[agent]
    held = world.specs[a.held].object_id if a.held >= 0 else ""
    seen = []
    for k in visible:
        parent = world.objs[k].parent
        entry = {
            "objectId": world.specs[k].object_id,
            "objectType": world.specs[k].object_type,
            "distance": np.array(round(world.distance(agent, k), 2), dtype=np.float64),
            "state": object_state(world, k),
            "in": world.specs[parent].object_id if parent >= 0 else "",
        }
        if belongs is not None:
            entry["belongs"] = belongs.get(k, ())
        seen.append(entry)
    inbox = [{"sender": m.sender, "text": m.text, "truncated": int(m.truncated)} for m in messages]
    pose = np.array([a.i * GRID_SIZE, a.j * GRID_SIZE, float(a.rotation), float(a.horizon)])
    lines = [
        f"You are {name}. Task: {instruction}",
        f"Tick {tick}. You stand at x={pose[0]:.2f}, z={pose[1]:.2f}, facing {a.rotation} degrees, "
        f"looking {a.horizon:+.0f} degrees.",
        f"You hold: {held or 'nothing'}.",
        f"Last action: {last.text or 'none'} -> {'ok' if last.success else 'FAILED'}: "
        f"{last.feedback}",
        "You see:" if seen else "You see nothing you can interact with.",
    ]
    for o in seen:
        extra = f" [{o['state']}]" if o["state"] else ""
        where = f" in {o['in']}" if o["in"] else ""
        home = f"; belongs here: {', '.join(o['belongs'])}" if o.get("belongs") else ""
        lines.append(
            f"  - {o['objectId']} ({o['objectType']}, {float(o['distance']):.1f} m)"
            f"{extra}{where}{home}"
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
        "last_action": printable(last.text)[:MAX_ACTION_TEXT],
        "last_success": int(last.success),
        "feedback": printable(last.feedback)[:2_000],
        "failure": {
            "reason": last.reason,
            "permanent": int(last.permanent),
            "agent": last.other_agent,
        },
    }


def learn_visible(world: World, known: list[set[str]]) -> None:
    """Add to each agent's known objects (``known[k]``, objectIds) those it sees now."""
    for k, ids in enumerate(known):
        for s in world.specs:
            if s.object_id not in ids and world.visible(k, s.index):
                ids.add(s.object_id)


def build_all(
    world: World,
    agents: list[str],
    instruction: str,
    tick: int,
    deciding: list[bool],
    inboxes: dict[str, list[Message]],
    last: list[LastAction],
    belongs: Mapping[int, tuple[str, ...]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every agent's observation (see :func:`build`), by agent name."""
    return {
        name: build(
            world,
            k,
            name,
            instruction,
            tick,
            deciding[k],
            [s.index for s in world.specs if world.visible(k, s.index)],
            inboxes[name],
            last[k],
            belongs,
        )
        for k, name in enumerate(agents)
    }


def infos(agents: list[str], deciding: list[bool], tick: int, satisfied: list[bool]) -> dict:
    """Every agent's info: whether it must decide, the tick, and the checklist's progress."""
    return {
        name: {
            "needs_decision": deciding[k],
            "tick": tick,
            "satisfied": sum(satisfied),
            "atoms": len(satisfied),
        }
        for k, name in enumerate(agents)
    }
