"""What a heuristic agent works on: the goal work open to it and the object it claims.

Work is a (clause, object, verb) triple (verbs: :mod:`baselines.heuristic.goals`): an object it
knows that does not satisfy a clause yet, that it is free to take up (not claimed by another,
not given up). An ``any``/``count>=k`` clause is left alone once it has seen enough objects
satisfy it; a goal on pieces (``inside(TomatoSliced, Plate)``) with no piece known starts by
slicing a known source; a rearrangement's objects are those known to be away from home
(:mod:`baselines.heuristic.homes`). The object it works on is its claim: announced once taken
up and again every ``CLAIM_TTL // 2`` ticks, so that teammates' memories do not let it lapse.
Of the work open to it, it takes up work on an object in view first, then by objectId; a
``greedy_nearest`` agent (:mod:`baselines.heuristic.style`) the object nearest to where it
stands, and it does not heed teammates' claims (its memory does not record them).
"""

from __future__ import annotations

from baselines.goal_routes import no_route, unpursuable
from baselines.heuristic.goals import about, satisfied, verb
from baselines.heuristic.memory import CLAIM_TTL, Memory
from baselines.heuristic.messages import Herald
from baselines.heuristic.style import metres
from benchmark.tasks.goals import HOME, Atom, Clause
from benchmark.teamkit import type_of_id as _type


class Chooser:
    """One agent's choice of work.

    Args:
        name: the agent.
        goal: the task's goal clauses.
        memory: what it knows.
        herald: its outgoing messages (its claims).
        makes: source type -> the derived type a goal wants (``Tomato`` -> ``TomatoSliced``).
        nearest: it takes up the work on the nearest object first.

    Attributes:
        mine: the object it works on and has claimed, or None.
    """

    def __init__(
        self,
        name: str,
        goal: list[Clause],
        memory: Memory,
        herald: Herald,
        makes: dict[str, str],
        nearest: bool = False,
    ) -> None:
        self.name = name
        self.nearest = nearest
        self.goal = goal
        self.memory = memory
        self.herald = herald
        self.makes = makes
        self.mine: str | None = None

    def enough(self, c: Clause) -> bool:
        """Whether an ``any``/``count>=k`` clause holds for the objects it has seen."""
        if c.quantifier == "all":
            return False
        seen = self.memory.seen
        done = sum(1 for oid, e in seen.items() if about(c, oid) and satisfied(c, e))
        return done >= max(1, c.count)

    def todo(self, holding: str) -> list[tuple[Clause, str, str]]:
        """(clause, object, verb) it could work on (verbs: :mod:`baselines.heuristic.goals`).
        Without a known piece to take, a goal on pieces (TomatoSliced) slices a known source.
        Raises UnpursuableGoal on an ``all`` clause's object whose state no skill brings
        about."""
        memory, seen = self.memory, self.memory.seen
        out = []
        for c in self.goal:
            if c.target == HOME:
                out += memory.homes.todo(c, seen, lambda o: memory.free(o, holding), memory.avoid)
                continue
            if self.enough(c):
                continue
            v = verb(c)
            pieces = [oid for oid in seen if about(c, oid) and not satisfied(c, seen[oid])]
            if v is None:
                if pieces and c.quantifier == "all":
                    key = Atom(c.predicate, pieces[0], c.target, c.value).key
                    why = no_route(c.predicate, c.value, c.target) or ""
                    raise unpursuable("heuristic", key, why)
                continue
            out += [(c, oid, v) for oid in pieces if memory.free(oid, holding)]
            if pieces or _type(c.subject) not in self.makes.values():
                continue
            out += [
                (c, oid, "slice")
                for oid, entry in seen.items()
                if self.makes.get(_type(oid)) == _type(c.subject)
                and "sliced" not in entry.get("state", "")
                and memory.free(oid, holding)
            ]
        return out

    def ranked(
        self, todo: list[tuple[Clause, str, str]], visible: dict
    ) -> list[tuple[Clause, str, str]]:
        """``todo`` in the order it takes work up: objects in view first, then by objectId;
        nearest first (then by objectId) for a ``greedy_nearest`` agent."""
        if self.nearest:
            pose = self.memory.pose
            return sorted(todo, key=lambda t: (metres(t[1], pose), t[1]))
        return sorted(todo, key=lambda t: (t[1] not in visible, t[1]))

    def take(self, oid: str) -> None:
        """Work on ``oid`` from now on; a change of object is claimed at once."""
        if self.mine != oid:
            self.mine = oid
            self.memory.claim(oid, self.name)
            self.herald.say_first(f"claim {oid}")

    def hold(self, oid: str) -> None:
        """Work on ``oid``, which it now holds (lifted with a partner), and claim it."""
        self.mine = oid
        self.herald.say_first(f"claim {oid}")

    def drop(self) -> None:
        """Work on nothing in particular."""
        self.mine = None

    def renew(self) -> None:
        """Claim its object again once half a claim's life has passed since it last did."""
        memory = self.memory
        if self.mine is None:
            return
        if memory.tick - memory.claimed_at.get(self.mine, memory.tick) > CLAIM_TTL // 2:
            memory.claimed_at[self.mine] = memory.tick
            self.herald.say_first(f"claim {self.mine}")
