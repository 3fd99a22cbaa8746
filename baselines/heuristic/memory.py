"""What a heuristic agent remembers of the world and of its teammates.

It knows an object by its last observed entry (:mod:`baselines.heuristic.goals`), or by a
teammate's ``found`` message until it sees the object itself; it remembers the containers
searched (by itself or, as reported, by a teammate), who claimed which object and when, where
rearranged objects belong (:class:`~baselines.heuristic.homes.Homes`), and what it gave up on:
actions that failed for a reason that cannot change and the objects they were about.

A claim of a teammate lapses ``CLAIM_TTL`` ticks after it was made or heard (the teammate may
have given the object up); its own claims it renews while it works on them. Two claims on one
object: the lower agent index keeps it. A ``done`` object stays claimed by who delivered it.
A ``greedy_nearest`` agent (:mod:`baselines.heuristic.style`) does not heed teammates' claim
messages; what a failed pickup says a teammate holds, and what one delivered, stay theirs.
"""

from __future__ import annotations

from typing import Any

from baselines.heuristic.homes import Homes
from baselines.heuristic.lift import LiftCrew
from baselines.heuristic.messages import NEWS
from benchmark.tasks.goals import Clause
from benchmark.teamkit import type_of_id

CLAIM_TTL = 40  # ticks after which another agent's claim is treated as abandoned


def _index(agent: str) -> int:
    return int(agent.rsplit("_", 1)[1])


class Memory:
    """One agent's memory of the world and of its teammates.

    Args:
        name: the agent (``agent_k``).
        goal: the task's goal clauses.
        lift: the agent's side of the joint lift (objects it rests from are not free).
        heeds_claims: whether teammates' ``claim`` messages keep it off their objects.

    Attributes:
        tick: the tick of its last observation.
        pose: where it stood then (x, z metres).
        seen: objectId -> its last observed entry (or the one a ``found`` message gave).
        searched: containers opened, by itself or a teammate.
        claims: objectId -> the agent working on it.
        claimed_at: objectId -> the tick of that claim.
        homes: where the objects of ``@home`` clauses belong.
        futile: (action, what it held) that cannot work.
        avoid: objects it gave up on (what a futile action was about, and the like).
    """

    def __init__(
        self, name: str, goal: list[Clause], lift: LiftCrew, heeds_claims: bool = True
    ) -> None:
        self.name = name
        self.lift = lift
        self.heeds_claims = heeds_claims
        self.tick = 0
        self.pose = (0.0, 0.0)
        self.seen: dict[str, dict[str, Any]] = {}
        self.searched: set[str] = set()
        self.claims: dict[str, str] = {}
        self.claimed_at: dict[str, int] = {}
        self.homes = Homes(goal)
        self.futile: set[tuple[str, str]] = set()
        self.avoid: set[str] = set()

    def observe(self, obs: dict[str, Any]) -> None:
        """Take in the tick, where it stands and what is in view; teammates' claims lapse."""
        self.tick = int(obs["tick"])
        if obs.get("pose") is not None:
            self.pose = (float(obs["pose"][0]), float(obs["pose"][1]))
        for oid, at in list(self.claimed_at.items()):
            if self.tick - at > CLAIM_TTL and self.claims.get(oid) != self.name:
                del self.claims[oid], self.claimed_at[oid]
        for entry in obs["visible"]:
            self.seen[entry["objectId"]] = dict(entry)

    def claim(self, oid: str, agent: str) -> None:
        """Note ``agent`` as working on ``oid`` from now on."""
        self.claims[oid] = agent
        self.claimed_at[oid] = self.tick

    def failed(self, failure: dict[str, Any], action: str, holding: str) -> None:
        """Learn from the failure of its last ``action`` (structured, never from the text): an
        object held by a teammate is the teammate's, and an action that failed for a reason
        that cannot change is not tried again with the same thing in hand."""
        target = action.partition(" ")[2]
        if failure["reason"] == "held_by_other" and target and failure["agent"]:
            self.claim(target, failure["agent"])
        if failure["permanent"]:
            self.futile.add((action, holding))

    def hear(self, sender: str, text: str) -> None:
        """Take in one message of a teammate's (those not in ``NEWS`` are ignored)."""
        m = NEWS.match(text)
        if m is None:
            return
        verb, oid, where = m.groups()
        if verb == "claim":
            if not self.heeds_claims:
                return
            mine = self.claims.get(oid) == self.name
            if not (mine and _index(self.name) < _index(sender)):
                self.claim(oid, sender)
        elif verb == "found" and oid not in self.seen:
            self.seen[oid] = {
                "objectId": oid,
                "objectType": type_of_id(oid),
                "state": "",
                "in": where or "",
            }
        elif verb == "home" and where:
            self.homes.hear(oid, where, self.seen)
        elif verb == "searched":
            self.searched.add(oid)
        elif verb == "done":
            self.claims[oid] = sender
            self.claimed_at[oid] = 10**9  # delivered: never lapses

    def free(self, oid: str, holding: str) -> bool:
        """Whether it may work on ``oid``: not given up (nor what it is in), not left alone
        after a lift that did not happen, not claimed by another, not in hand."""
        if oid in self.avoid or self.seen[oid].get("in", "") in self.avoid or self.lift.rests(oid):
            return False
        return self.claims.get(oid, self.name) == self.name and oid != holding
