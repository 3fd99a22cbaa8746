"""How the skills bring about each state a goal can ask for; the scripted teams share it.

Agents act through skills (``navigate``, ``pickup``, ``put``, ``open``, ``close``,
``toggle_on``/``toggle_off``, ``slice``, ``lift``). The simulator's other actions
(``CleanObject``, ``DirtyObject``, ``FillObjectWithLiquid``, ``EmptyLiquidFromObject``) exist
only at the primitive action level, so at the skill level each predicate has one route:

* ``inside``/``on``: pick the object up (a joint lift when heavy) and put it in the receptacle,
  or, for ``=false``, take it out and put it somewhere else;
* ``isOpen``: open or close it; ``isToggled``: switch it on or off;
* ``isSliced``: slice it while holding a Knife or ButterKnife;
* ``isCooked``: put it in a heat source that accepts it (a Microwave; a Toaster for bread
  slices) and switch that on;
* ``isDirty=false``, ``isFilledWithLiquid`` and ``filledWith(X, water)``: running water, as
  :func:`benchmark.sim.state_changes.settle` applies it: put the object in the basin a Faucet
  runs into (a SinkBasin or BathtubBasin) and switch that Faucet on;
* ``filledWith(X, coffee)`` (and ``isFilledWithLiquid`` where no basin takes X): put it in a
  CoffeeMachine and switch that on.

Which states some skill brings about is read off the skills' declarations
(:mod:`benchmark.skills`: each skill's ``effects`` and ``side_effects``): the built-in ones
dirty, empty, unslice and uncook nothing, and no liquid source gives wine (:func:`no_route`).
"""

from __future__ import annotations

from benchmark.skills import skills_bringing_about
from benchmark.teamkit import BASINS, ObjectFacts

# The heat source a type is best cooked in; others fall back on HEATERS.
HEAT_FOR = {"BreadSliced": "Toaster"}
HEATERS = ("Microwave", "Toaster")
# How to say that no skill brings a state about (whether one does is the skills' declarations').
_NO_SKILL = {
    ("isDirty", True): "no skill makes an object dirty (only the primitive DirtyObject does)",
    ("isFilledWithLiquid", False): (
        "no skill empties an object (only the primitive EmptyLiquidFromObject does)"
    ),
    ("filledWith", False): "no skill empties an object (only the primitive EmptyLiquidFromObject "
    "does)",
    ("isSliced", False): "slicing is for good: no skill makes a sliced object whole",
    ("isCooked", False): "cooking is for good: no skill uncooks an object",
}


class UnpursuableGoal(ValueError):
    """A goal atom the team has no way to bring about; the message names the atom and why."""


def unpursuable(team: str, atom: str, why: str) -> UnpursuableGoal:
    """The error a team raises for goal atom ``atom`` (its key) that it cannot pursue."""
    return UnpursuableGoal(f"{team}: no way to bring about the goal atom {atom}: {why}")


def no_route(predicate: str, value: bool, target: str | None) -> str | None:
    """Why no sequence of skills can make ``predicate`` take ``value`` on an object that does
    not have it yet (None when some declared skill brings it about)."""
    if not skills_bringing_about(predicate, value):
        return _NO_SKILL.get(
            (predicate, value), f"no skill brings about {predicate}={str(value).lower()}"
        )
    if predicate == "filledWith" and value and target == "wine":
        return (
            "no skill fills an object with wine: a CoffeeMachine gives coffee and running water "
            "gives water (only the primitive FillObjectWithLiquid gives wine)"
        )
    return None


def heater_types(kind: str, facts: ObjectFacts) -> list[str]:
    """The heat-source types that accept a ``kind``, the one it is best cooked in first."""
    order = [HEAT_FOR[kind]] if kind in HEAT_FOR else []
    order += [h for h in HEATERS if h not in order]
    return [h for h in order if facts.accepts(h, kind)]


def liquid_sources(kind: str, liquid: str | None, facts: ObjectFacts) -> list[str]:
    """The receptacle types that fill a ``kind`` with ``liquid`` (None: any liquid): basins
    under a Faucet for water, a CoffeeMachine for coffee."""
    out = []
    if liquid in (None, "water"):
        out += [b for b in BASINS if facts.accepts(b, kind)]
    if liquid in (None, "coffee") and facts.accepts("CoffeeMachine", kind):
        out.append("CoffeeMachine")
    return out


def washing_basins(kind: str, facts: ObjectFacts) -> list[str]:
    """The basin types a ``kind`` can be put in to be washed under running water."""
    return [b for b in BASINS if facts.accepts(b, kind)]
