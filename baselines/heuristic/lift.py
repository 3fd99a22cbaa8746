"""How a heuristic agent gets a heavy object lifted: recruiting a partner by message.

Nothing in an observation says that an object is heavy. An agent learns it the way a person
would: its ``pickup`` fails with the reason ``too_heavy``, or a teammate asks for help with it.
A heavy object is picked up only when two agents that see it, hands empty, ``lift`` it in the
same tick; one of them then holds it and carries it like any other object (its usual delivery
puts it), while the other goes back to its own work. The protocol, over broadcast messages:

* ``help lift <id>``: the agent that found the object (the *leader*) stays where it sees it and
  asks for a partner;
* ``coming <id>``: a teammate with free hands and no lift of its own answers and walks there.
  Two answers to one request: the lower agent index goes, the other stands down, so only two
  agents ever work on one heavy object, however large the team. A leader still waiting for an
  answer gives way to a request of a lower-indexed agent (two requests crossing would otherwise
  wait for each other);
* ``ready <id>``: each says so once it sees the object. The helper then issues ``lift <id>``
  every tick; the leader waits (a waiting agent steps aside for a partner walking into its
  cell, by the env's courtesy rule) until it hears the partner's ``ready``, then lifts every
  tick too. Lift and wait are one-tick skills, so both decide in the same ticks and the lifts
  meet one tick after the partner arrives. A lift alone fails (``needs_partner``) and costs
  one tick, like a wait; a leader nobody answered lifts every tick, since a teammate that
  found the object heavy too may lift it unasked.

Every wait has a patience: a request nobody answers, a partner who never arrives. A leader that
gives up leaves the object alone for ``REST`` ticks, then tries again; a leader that knows every
teammate busy with another lift (helping, or carrying what it lifted, until its ``done``) asks
but does not wait. Either way an answer that comes later brings it back. With communication
off nobody hears a request, and a lift happens only when two agents both found the object heavy
and wait at it at the same time.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from benchmark.env.skills import SkillFailure

REQUEST_TTL = 40  # ticks a request stays open for an answer (an explore lasts up to 30)
PARTNER_PATIENCE = 60  # ticks to wait, once answered, for the lift to happen
REST = 40  # ticks a leader leaves an object alone after giving up on it
BUSY_TTL = 80  # ticks after which a teammate busy with a lift is thought free again
_MESSAGE = re.compile(r"^(help lift|coming|ready|done) (\S+)$")


def _index(agent: str) -> int:
    return int(agent.rsplit("_", 1)[1])


@dataclass
class Lift:
    """The joint lift an agent works on.

    Attributes:
        oid: the heavy object.
        lead: whether it asked for help (True) or answered a request (False).
        partner: the other lifter, once known ("" until a leader hears an answer).
        since: the tick of the request (leader) or of the answer (helper), or of the answer
            the leader heard; patience counts from it.
        ready: whether it has said ``ready`` (it sees the object).
        partner_ready: whether the partner has said ``ready``.
    """

    oid: str
    lead: bool
    partner: str = ""
    since: int = 0
    ready: bool = False
    partner_ready: bool = False


class LiftCrew:
    """One agent's side of the joint-lift protocol.

    Args:
        name: the agent's name (``agent_k``).
        teammates: every agent's name, its own included.
        outbox: the agent's outgoing messages (shared with its other rules; one is sent per
            decision).
    """

    def __init__(self, name: str, teammates: list[str], outbox: deque[str]) -> None:
        self.name = name
        self.others = [a for a in teammates if a != name]
        self.outbox = outbox
        self.heavy: set[str] = set()  # objects it knows need a joint lift
        self.requests: dict[str, tuple[str, int]] = {}  # oid -> (leader, tick of the request)
        self.helpers: dict[str, str] = {}  # oid -> the agent that answered the request
        self.busy: dict[str, tuple[str, int]] = {}  # teammate -> (the lift it is on, since)
        self.resting: dict[str, int] = {}  # oid -> tick until which it leaves the object alone
        self.job: Lift | None = None
        self.tick = 0

    # ------------------------------------------------------------------ perception
    def failed(self, reason: str, oid: str) -> None:
        """Its last action, on ``oid``, failed for ``reason``: a ``pickup`` refused as
        ``too_heavy`` tells that the object needs a joint lift."""
        if reason == SkillFailure.TOO_HEAVY and oid:
            self.heavy.add(oid)

    def hear(self, sender: str, text: str, tick: int) -> None:
        """Read one message received at ``tick`` (those of other kinds are ignored)."""
        self.tick = tick
        m = _MESSAGE.match(text)
        if m is None:
            return
        kind, oid = m.groups()
        if kind == "done":  # delivered: whoever lifted it is free again
            self.busy = {a: b for a, b in self.busy.items() if b[0] != oid}
            self.requests.pop(oid, None)
            return
        self.heavy.add(oid)
        if kind == "help lift":
            self._requested(sender, oid)
        elif kind == "coming":
            self._answered(sender, oid)
        elif self.job is not None and self.job.oid == oid and self.job.partner in ("", sender):
            self.job.partner = sender  # (unknown before: it found the object heavy too, unasked)
            self.job.partner_ready = True

    def _requested(self, leader: str, oid: str) -> None:
        self.requests[oid] = (leader, self.tick)
        self.helpers.pop(oid, None)
        self.busy.pop(leader, None)  # waiting for a partner: free to be helped
        job = self.job
        if job is not None and job.lead and not job.partner and _index(leader) < _index(self.name):
            self._give_up(rest=False)  # its request crossed a lower-indexed one: answer that

    def _answered(self, helper: str, oid: str) -> None:
        other = self.helpers.get(oid)
        if other is None or _index(helper) < _index(other):
            self.helpers[oid] = helper
        leader = self.requests.get(oid, ("", 0))[0]
        for agent in (helper, leader):
            if agent and agent != self.name:
                self.busy[agent] = (oid, self.tick)
        job = self.job
        alone = job is None or (job.lead and not job.partner and job.oid != oid)
        if leader == self.name and alone:  # an answer to a request it stopped waiting for
            self.job = job = Lift(oid, lead=True, since=self.tick)
        if job is None or job.oid != oid:
            return
        if job.lead and (not job.partner or _index(helper) < _index(job.partner)):
            job.partner, job.since = helper, self.tick
        elif not job.lead and _index(helper) < _index(self.name):
            self.job = None  # a lower-indexed teammate answered too: it goes

    def lifted(self, oid: str, holding: str) -> str:
        """Its ``lift`` of ``oid`` succeeded: the job is over. Returns who holds the object
        now: itself, its partner, or "" (a teammate it had not heard from yet)."""
        job, self.job = self.job, None
        self.requests.pop(oid, None)
        stale = {f"{kind} {oid}" for kind in ("help lift", "coming", "ready")}
        kept = [text for text in self.outbox if text not in stale]
        self.outbox.clear()
        self.outbox.extend(kept)
        if holding == oid:
            return self.name
        partner = job.partner if job is not None and job.oid == oid else ""
        if partner:
            self.busy[partner] = (oid, self.tick)  # carrying it
        return partner

    # ------------------------------------------------------------------ acting
    def rests(self, oid: str) -> bool:
        """Whether it leaves ``oid`` alone for now (it gave up waiting at it)."""
        return self.resting.get(oid, -1) > self.tick

    def step(self, tick: int, holding: str, visible: set[str]) -> str | None:
        """Its next action for a lift it works on or a request it answers; None when neither.

        Args:
            tick: the current tick.
            holding: the objectId it holds ("" for none); a lift needs free hands.
            visible: the objectIds it sees now.
        """
        self.tick = tick
        self.busy = {a: b for a, b in self.busy.items() if tick - b[1] <= BUSY_TTL}
        answered = self.job is None and not holding and self._answer()
        job = self.job
        if job is None or holding:
            return None
        patience = PARTNER_PATIENCE if job.partner else REQUEST_TTL
        if tick - job.since > patience:
            self._give_up(rest=job.lead)
            return None
        step = self._approach(job, visible)
        if answered:
            self.outbox.appendleft(f"coming {job.oid}")  # before its ``ready``
        return step

    def lead(self, oid: str, tick: int, visible: set[str]) -> str:
        """The next action towards lifting heavy ``oid``, a goal object it found: ask for a
        partner (once) and wait where it sees the object; when every teammate is busy with
        another lift, ask but do not wait (an answer brings it back)."""
        self.tick = tick
        if self.job is not None and self.job.oid == oid:
            return self._approach(self.job, visible)
        self.job = Lift(oid, lead=True, since=tick)
        self.requests[oid] = (self.name, tick)
        if self.others and all(a in self.busy for a in self.others):
            self.outbox.appendleft(f"help lift {oid}")
            self._give_up(rest=True)
            return "explore"
        step = self._approach(self.job, visible)
        self.outbox.appendleft(f"help lift {oid}")  # before its ``ready``
        return step

    def _approach(self, job: Lift, visible: set[str]) -> str:
        """Go where it sees the object and say ``ready``; then lift every tick, except a leader
        whose partner is on the way: it waits (standing aside for the partner, by the env's
        courtesy rule) until it hears the partner's ``ready``."""
        if job.oid not in visible:
            return f"navigate {job.oid}"
        if not job.ready:
            job.ready = True
            self.outbox.appendleft(f"ready {job.oid}")
        if job.lead and job.partner and not job.partner_ready:
            return "wait"
        return f"lift {job.oid}"

    def _answer(self) -> bool:
        """Take up the open request of the lowest-indexed leader nobody answered yet; returns
        whether there was one."""
        open_ = [
            (_index(leader), oid)
            for oid, (leader, at) in self.requests.items()
            if leader != self.name and oid not in self.helpers and self.tick - at <= REQUEST_TTL
        ]
        if not open_:
            return False
        _, oid = min(open_)
        leader = self.requests[oid][0]
        self.job = Lift(oid, lead=False, partner=leader, since=self.tick)
        self.helpers[oid] = self.name
        return True

    def _give_up(self, rest: bool) -> None:
        job, self.job = self.job, None
        if job is not None and rest:
            self.resting[job.oid] = self.tick + REST
