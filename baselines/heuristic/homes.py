"""How a heuristic agent learns where things belong, for rearrangement goals
(``all: inside(X, @home)``: every X back in the receptacle it rested in).

An agent cannot know an object's home until it sees it: in episodes with such a goal every
visible entry of the observation lists under ``belongs`` the goal objects whose home it is and
that are elsewhere now (:mod:`benchmark.env.homes`). The agent remembers each home it learns,
tells the others once (``home <objectId> in <receptacleId>``) and learns theirs the same way.
An object is to be carried home while it is known to be away: listed by its home, and not
seen since resting there nor missing from the list of its home in view.

An object known to be away but not where it is (or a home not seen yet) may lie where
exploring never looks from close enough: an observation shows only what is in view when the
agent decides, not what it passed on the way. Once a few observations in a row turn up nothing
new, the agent goes to look at the known receptacles that could hold one, nearest first, and
opens closed receptacles that could (a toilet), as it does drawers and cabinets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from baselines.heuristic.goals import about
from benchmark.tasks.goals import HOME, Clause
from benchmark.teamkit import ObjectFacts, type_of_id

QUIET = 3  # observations in a row without a new object before it goes to look at receptacles


class Homes:
    """One agent's knowledge of where the goal objects belong."""

    def __init__(self, goal: list[Clause]) -> None:
        self.home: dict[str, str] = {}  # objectId -> its home receptacle's objectId
        self.away: set[str] = set()  # objects last known to be elsewhere than home
        self.kinds = {  # the types of the objects that @home clauses want back
            type_of_id(c.subject) for c in goal if c.predicate == "inside" and c.target == HOME
        }
        self.sighted: set[str] = set()  # every object it has seen
        self.quiet = 0  # observations in a row that showed no object it had not seen before
        self.looked: set[str] = set()  # receptacles it went to look at this round
        self.pose = (0.0, 0.0)  # where it stands (x, z metres)
        self.in_view: set[str] = set()  # what it sees now

    def see(self, obs: dict[str, Any]) -> list[str]:
        """Learn from one observation; returns the messages that tell the others the homes
        learned now. Without ``@home`` clauses there is nothing to learn."""
        if not self.kinds:
            return []
        visible = obs["visible"]
        self.pose = (float(obs["pose"][0]), float(obs["pose"][1]))
        ids = {e["objectId"] for e in visible}
        self.quiet = 0 if ids - self.sighted else self.quiet + 1
        self.sighted |= ids
        self.in_view = ids
        news = []
        for entry in visible:
            receptacle, listed = entry["objectId"], entry.get("belongs", ())
            for oid in listed:
                if oid not in self.home:
                    news.append(f"home {oid} in {receptacle}")
                self.home[oid] = receptacle
                self.away.add(oid)
            # Its home in view no longer lists it: someone brought it back.
            self.away -= {o for o in self.away if self.home[o] == receptacle} - set(listed)
        return news

    def hear(self, oid: str, receptacle: str, seen: dict[str, dict[str, Any]]) -> None:
        """Learn a home from a teammate's ``home`` message; the receptacle becomes known."""
        if not self.kinds or oid in self.home:
            return
        self.home[oid] = receptacle
        self.away.add(oid)
        seen.setdefault(
            receptacle,
            {"objectId": receptacle, "objectType": type_of_id(receptacle), "state": "", "in": ""},
        )

    def todo(
        self,
        c: Clause,
        seen: dict[str, dict[str, Any]],
        free: Callable[[str], bool],
        avoid: set[str],
    ) -> list[tuple[Clause, str, str]]:
        """(clause, object, ``take``) for the objects of the ``@home`` clause ``c`` that it
        knows to be away, knows where to find, may work on (``free``), and whose home is not
        given up (``avoid``)."""
        return [
            (c, oid, "take")
            for oid in sorted(self.away)
            if about(c, oid)
            and oid in seen
            and seen[oid].get("in", "") != self.home[oid]
            and self.home[oid] not in avoid
            and free(oid)
        ]

    def look(self, seen: dict[str, dict[str, Any]], facts: ObjectFacts) -> str | None:
        """A step to look for goal objects: once ``QUIET`` observations in a row showed nothing
        new, navigate to the nearest known receptacle out of view, not looked at this round,
        that could hold an object known to be away but not where (with none such, any object
        of an ``@home`` clause: its home may be one it has not seen). Openable receptacles are
        left to opening. None while it is still finding things, without ``@home`` clauses, or
        when the round is over (the next starts afresh: teammates may have moved things)."""
        lost = {type_of_id(o) for o in self.away if o not in seen} or self.kinds
        if not lost or self.quiet < QUIET:
            return None
        spots = [
            r
            for r, e in seen.items()
            if r not in self.looked
            and r not in self.in_view  # navigating to it would end where it stands
            and not {"open", "closed"} & set(e.get("state", "").split(", "))  # searched apart
            and any(facts.accepts(e["objectType"], t) for t in lost)
        ]
        if not spots:
            self.looked.clear()
            return None
        spot = min(spots, key=lambda r: (self._distance(r), r))
        self.looked.add(spot)
        return f"navigate {spot}"

    def could_hide(self, kind: str, facts: ObjectFacts) -> bool:
        """Whether a closed receptacle of type ``kind`` (a toilet, say, besides the usual
        drawers and cabinets) may hold an object an ``@home`` clause wants back."""
        return any(facts.accepts(kind, k) for k in self.kinds)

    def _distance(self, oid: str) -> float:
        """Metres from where it stands to where ``oid`` was recorded (its objectId holds the
        position, ``Type|x|y|z``); infinite when the id holds none."""
        parts = oid.split("|")
        try:
            x, z = float(parts[1]), float(parts[3])
        except (IndexError, ValueError):
            return math.inf
        return math.hypot(x - self.pose[0], z - self.pose[1])

    def of(self, oid: str) -> str | None:
        """Where ``oid`` belongs, if a goal wants it home and it knows where that is."""
        return self.home.get(oid)
