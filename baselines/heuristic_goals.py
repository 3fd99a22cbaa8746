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
from benchmark.goals import HOME, Clause
from benchmark.sim.catalog import type_of_id
from benchmark.sim.facts import ObjectFacts

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
