"""What a replay page shows beside its picture, read from a verified trace: per tick, each
agent's decision, skill and action, the messages sent and the checklist so far; and the
pagination of an entry's episode list and of a replay's tick links.

Ticks are counted as the picture shows them: tick ``t`` is the world after ``t`` ticks (0: the
start), and what happened "in tick t" is what the trace records at the env's tick ``t - 1``:
the decisions taken and messages sent before it ran, the agents' primitive actions, the skills
that ended and the atoms that changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from benchmark.media.viewer import checklist_states

EPISODES_PER_PAGE = 25
TICK_LINKS = 24  # evenly spaced tick links on a replay page, besides the notable ticks


@dataclass(frozen=True)
class AgentTick:
    """One agent in one tick.

    Attributes:
        agent: its name (``agent_0``); ``index`` its number on the map.
        decision: the action text it chose before the tick ran, None when it chose nothing.
        skill: the skill running in the tick.
        action: the primitive action it performed (None: none), ``ok`` whether it succeeded.
        blocked: another agent held it up.
        ended: the skills that ended in the tick, e.g. ``pickup Apple|...: failed (hands_full)``.
    """

    agent: str
    index: int
    decision: str | None
    skill: str | None
    action: str | None
    ok: bool | None
    blocked: bool
    ended: tuple[str, ...]


@dataclass(frozen=True)
class TickMessage:
    """A message sent before the tick ran."""

    sender: str
    recipients: tuple[str, ...]
    text: str
    truncated: bool
    delivered: bool


@dataclass(frozen=True)
class AtomState:
    """A checklist atom after the tick: whether it holds, and who changed it in this tick."""

    key: str
    satisfied: bool
    changed_by: str | None


@dataclass(frozen=True)
class TickView:
    """Everything a replay page says about tick ``tick`` of ``ticks``."""

    tick: int
    ticks: int
    instruction: str
    success: bool
    agents: tuple[AgentTick, ...]
    messages: tuple[TickMessage, ...]
    checklist: tuple[AtomState, ...]
    satisfied: int
    checklist_ticks: tuple[int, ...]  # ticks in which an atom changed
    message_ticks: tuple[int, ...]  # ticks before which a message was sent


def _ended(skill: dict[str, Any]) -> str:
    what = f"{skill['skill']} {skill['target']}" if skill["target"] else skill["skill"]
    if skill["success"]:
        return f"{what}: done"
    reason = f" ({skill['reason']})" if skill["reason"] else ""
    return f"{what}: failed{reason}"


def tick_view(trace: dict[str, Any], tick: int) -> TickView:
    """Tick ``tick`` (0 to ``final.ticks``) of a verified trace; ValueError for another."""
    ticks = trace["final"]["ticks"]
    if not 0 <= tick <= ticks:
        raise ValueError(f"tick {tick} is not in [0, {ticks}]")
    at = tick - 1  # the env's tick that led to this picture (-1: none, the start)
    names = [f"agent_{k}" for k in range(trace["config"]["n_agents"])]
    decisions: dict[str, str] = {}
    for decision in trace["decisions"]:
        if decision["tick"] == at:
            decisions.update(decision["actions"])
    ended: dict[str, list[str]] = {}
    for skill in trace["skills"]:
        if skill["end"] == at:
            ended.setdefault(skill["agent"], []).append(_ended(skill))
    row = trace["ticks"][at] if at >= 0 else [[None, None, None, False]] * len(names)
    agents = tuple(
        AgentTick(
            name,
            k,
            decisions.get(name),
            skill,
            action,
            ok,
            bool(blocked),
            tuple(ended.get(name, ())),
        )
        for k, (name, (action, ok, skill, blocked)) in enumerate(zip(names, row, strict=True))
    )
    messages = tuple(
        TickMessage(m["sender"], tuple(m["recipients"]), m["text"], m["truncated"], m["delivered"])
        for m in trace["messages"]
        if m["tick"] == at
    )
    changed = {c["atom"]: c["agent"] for c in trace["atoms"] if c["tick"] == at}
    state = checklist_states(trace)[tick]
    checklist = tuple(
        AtomState(atom["key"], holds, changed.get(i))
        for i, (atom, holds) in enumerate(zip(trace["checklist"], state, strict=True))
    )
    return TickView(
        tick=tick,
        ticks=ticks,
        instruction=trace["instruction"],
        success=bool(trace["final"]["success"]),
        agents=agents,
        messages=messages,
        checklist=checklist,
        satisfied=sum(state),
        checklist_ticks=tuple(sorted({c["tick"] + 1 for c in trace["atoms"]})),
        message_ticks=tuple(sorted({m["tick"] + 1 for m in trace["messages"]})),
    )


def tick_links(tick: int, ticks: int, links: int = TICK_LINKS) -> list[int]:
    """Ticks to link from tick ``tick`` of ``ticks``: about ``links`` evenly spaced from 0 to
    ``ticks`` (both included) and the ticks either side of ``tick``, in order."""
    step = max(1, math.ceil(ticks / max(1, links - 1)))
    chosen = {*range(0, ticks + 1, step), ticks, tick}
    chosen |= {t for t in (tick - 1, tick + 1) if 0 <= t <= ticks}
    return sorted(chosen)


@dataclass(frozen=True)
class Pages:
    """Page ``page`` (1-based) of ``pages`` over ``items`` items: items ``start`` to ``stop``
    (exclusive)."""

    page: int
    pages: int
    items: int
    start: int
    stop: int


def paginate(items: int, page: int, per_page: int = EPISODES_PER_PAGE) -> Pages:
    """Page ``page`` of ``items`` items, ``per_page`` a page (one empty page when there are
    none); ValueError for a page that is not there."""
    pages = max(1, math.ceil(items / per_page))
    if not 1 <= page <= pages:
        raise ValueError(f"page {page} is not in [1, {pages}]")
    start = (page - 1) * per_page
    return Pages(page, pages, items, start, min(items, start + per_page))
