"""How the heuristic agents read goal clauses against what they have seen.

An agent knows an object by its last observed entry (``objectType``, ``state`` words such as
``open``, ``on``, ``sliced``, ``cooked``, ``dirty``, ``filled with water``, and ``in``: the
receptacle it rests in directly). Each clause maps to a verb, the kind of work it asks for on
one object, along the skill routes of :mod:`baselines.goal_routes`: ``take`` it to the
clause's receptacle, ``remove`` it from there (``inside=false``), ``toggle`` it, ``open`` or
close it, ``slice`` it holding a knife, ``cook`` it in a heat source, ``wash`` it under a
running faucet, ``fill`` it there or in a coffee machine.
"""

from __future__ import annotations

from typing import Any

from baselines.goal_routes import heater_types, liquid_sources, no_route, washing_basins
from benchmark.tasks.goals import HOME, Clause
from benchmark.teamkit import BASINS, ObjectFacts, type_of_id

CARRIED = ("take", "remove", "cook", "wash", "fill")  # verbs that carry the object somewhere


def verb(c: Clause) -> str | None:
    """The work a clause asks for on an object that does not satisfy it; None when no skill
    can bring its state about (:func:`baselines.goal_routes.no_route`)."""
    if no_route(c.predicate, c.value, c.target) is not None:
        return None
    if c.predicate == "inside":
        return "take" if c.value else "remove"
    return {
        "isToggled": "toggle",
        "isOpen": "open",
        "isSliced": "slice",
        "isCooked": "cook",
        "isDirty": "wash",
        "isFilledWithLiquid": "fill",
        "filledWith": "fill",
    }[c.predicate]


def about(c: Clause, oid: str) -> bool:
    """Whether object ``oid`` is one the clause is about (its objectId or its type)."""
    return oid == c.subject if "|" in c.subject else type_of_id(oid) == c.subject


def names(ref: str | None, oid: str) -> bool:
    """Whether ``oid`` is what ``ref`` (an objectId or a type) names."""
    return ref not in (None, HOME) and (oid == ref or type_of_id(oid) == ref)


def satisfied(c: Clause, entry: dict[str, Any]) -> bool:
    """Whether an object, as last seen (``entry``), satisfies clause ``c``."""
    words = entry.get("state", "").split(", ")
    if c.predicate == "inside":
        state = names(c.target, entry.get("in", "") or "")
    elif c.predicate == "filledWith":
        state = f"filled with {c.target}" in words
    elif c.predicate == "isFilledWithLiquid":
        state = any(w.startswith("filled with") for w in words)
    else:
        word = {
            "isToggled": "on",
            "isOpen": "open",
            "isSliced": "sliced",
            "isCooked": "cooked",
            "isDirty": "dirty",
        }[c.predicate]
        state = word in words
    return state == c.value


def places(c: Clause, kind: str, facts: ObjectFacts) -> tuple[str, ...]:
    """Where a ``kind`` is carried for the clause's verb (types, or an objectId): its target for
    ``take``, heat sources for ``cook``, basins (and a coffee machine) for ``wash``/``fill``."""
    v = verb(c)
    if v == "take":
        return (c.target,) if c.target not in (None, HOME) else ()
    if v == "cook":
        return tuple(heater_types(kind, facts))
    if v == "wash":
        return tuple(washing_basins(kind, facts))
    if v == "fill":
        liquid = c.target if c.predicate == "filledWith" else None
        return tuple(liquid_sources(kind, liquid, facts))
    return ()


class GoalReader:
    """What a goal makes worth knowing about, read once from its clauses: the objects it is
    about, where it wants things and the appliances it needs, and the sources and tools of
    pieces it wants sliced. The heuristic agents and the LLM agents' memory read goals alike.

    Attributes:
        goal: the clauses.
        facts: the object facts (derivations, slicing tools, appliances).
        makes: source type -> the derived type a goal wants (``Tomato`` -> ``TomatoSliced``).
        appliances: types a goal needs to cook, wash or fill in (faucets with basins).
    """

    def __init__(self, goal: list[Clause], facts: ObjectFacts) -> None:
        self.goal = goal
        self.facts = facts
        self.makes: dict[str, str] = {
            way.source: type_of_id(c.subject)
            for c in goal
            for way in facts.derivations(type_of_id(c.subject))
            if way.action == "SliceObject"
        }
        self.appliances = {
            kind
            for c in goal
            if verb(c) in ("cook", "wash", "fill")
            for kind in places(c, type_of_id(c.subject), facts)
        }
        if self.appliances & set(BASINS):
            self.appliances.add("Faucet")

    def wanted(self, oid: str) -> bool:
        """Whether a clause is about ``oid``."""
        return any(about(c, oid) for c in self.goal)

    def ingredient(self, oid: str) -> bool:
        """Whether ``oid`` is a source of pieces a goal wants, or a knife a goal needs."""
        slicing = bool(self.makes) or any(c.predicate == "isSliced" for c in self.goal)
        return type_of_id(oid) in self.makes or (
            slicing and type_of_id(oid) in self.facts.slicing_tools
        )

    def destination(self, oid: str) -> bool:
        """Whether ``oid`` is where a goal wants things put, or an appliance a goal needs."""
        if type_of_id(oid) in self.appliances:
            return True
        return any(c.predicate == "inside" and c.value and names(c.target, oid) for c in self.goal)

    def relevant(self, oid: str) -> bool:
        """Whether ``oid`` is any of these: worth telling the others about."""
        return self.wanted(oid) or self.destination(oid) or self.ingredient(oid)
