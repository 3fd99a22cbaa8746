"""The goal language of task specs, and its grounding into a checklist of atoms.

A goal is a list of clauses, each ``<quantifier>: <predicate>(<args>)[=<true|false>]``:

* quantifiers: ``all`` (one atom per instance of the subject type present at the start; over
  a type the scene lacks, no atom: it holds vacuously), ``any`` (one atom: at least one instance),
  ``count>=k`` (k atoms: the j-th holds when at least j instances satisfy the predicate);
* predicates: ``inside(X, Y)`` and its synonym ``on(X, Y)`` (X rests in or on Y, directly or
  nested), ``isToggled(X)``, ``isOpen(X)``, ``isSliced(X)``, ``isCooked(X)``, ``isDirty(X)``,
  ``isFilledWithLiquid(X)``, ``filledWith(X, coffee|wine|water)``;
* arguments: an object type (``Apple``), an objectId (``Apple|-00.47|+01.15|+00.48``), or
  ``@home`` as the second argument of ``inside``: the receptacle the object rests in in the
  recorded scene (for rearrangement; instances recorded in no receptacle are left out).

Subjects may be types that exist only after an action (``TomatoSliced``, ``EggCracked``: see
``scenes/derived_objects.yaml``). ``any`` and ``count>=k`` count the objects of the type that
exist whenever the atom is checked, so pieces made during the episode count; ``all`` over such
a type is rejected, since none of its objects exists when the episode starts. Which clauses the
simulator's rules can satisfy is decided in :mod:`benchmark.tasks.goal_rules`.

>>> parse_clause("all: inside(Apple, Fridge)")
Clause(quantifier='all', count=0, predicate='inside', subject='Apple', target='Fridge', value=True)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from benchmark.sim.state_changes import LIQUIDS
from benchmark.sim.world import World

UNARY = {
    "isToggled": "is_toggled",
    "isOpen": "is_open",
    "isSliced": "is_sliced",
    "isCooked": "is_cooked",
    "isDirty": "is_dirty",
    "isFilledWithLiquid": "is_filled",
}
BINARY = ("inside", "on", "filledWith")
HOME = "@home"
_CLAUSE = re.compile(
    r"^\s*(?P<q>all|any|count\s*>=\s*(?P<k>\d+))\s*:\s*(?P<p>[A-Za-z]+)\s*\((?P<args>[^)]*)\)"
    r"\s*(?:=\s*(?P<v>true|false))?\s*$"
)


class GoalError(ValueError):
    """A goal clause is malformed; the message says what was expected."""


@dataclass(frozen=True)
class Clause:
    """One parsed goal clause (see the module docstring)."""

    quantifier: str  # all | any | count
    count: int  # k for count>=k, else 0
    predicate: str
    subject: str  # object type or objectId
    target: str | None  # second argument, if any
    value: bool

    @property
    def text(self) -> str:
        """The clause in its canonical form, e.g. ``count>=2: isCooked(BreadSliced)``."""
        args = self.subject if self.target is None else f"{self.subject}, {self.target}"
        quantifier = f"count>={self.count}" if self.quantifier == "count" else self.quantifier
        return f"{quantifier}: {self.predicate}({args})" + ("" if self.value else "=false")


@dataclass(frozen=True)
class Atom:
    """One checklist item grounded on an episode.

    ``subject`` is an objectId, or a type when ``at_least`` > 0 (the atom then holds when at
    least ``at_least`` objects of that type satisfy the predicate).
    """

    predicate: str
    subject: str
    target: str | None
    value: bool
    at_least: int = 0

    @property
    def key(self) -> str:
        """A stable, readable identifier, e.g. ``inside(Apple|...,Fridge)=true``."""
        args = self.subject if self.target is None else f"{self.subject},{self.target}"
        head = f"#{self.at_least} " if self.at_least else ""
        return f"{head}{self.predicate}({args})={str(self.value).lower()}"


def parse_clause(text: str) -> Clause:
    """Parse one clause; raises GoalError naming what is wrong."""
    if not isinstance(text, str):
        raise GoalError(
            f"a goal clause must be a string like 'all: inside(Apple, Fridge)', got {text!r}"
        )
    m = _CLAUSE.match(text)
    if m is None:
        raise GoalError(
            f"cannot parse goal clause {text!r}: "
            "expected '<all|any|count>=k>: predicate(args)[=true|false]'"
        )
    predicate = m.group("p")
    args = [a.strip() for a in m.group("args").split(",") if a.strip()]
    if predicate in UNARY:
        if len(args) != 1:
            raise GoalError(f"{predicate} takes one argument, got {len(args)} in {text!r}")
    elif predicate in BINARY:
        if len(args) != 2:
            raise GoalError(f"{predicate} takes two arguments, got {len(args)} in {text!r}")
        if predicate == "filledWith" and args[1] not in LIQUIDS:
            raise GoalError(f"filledWith's liquid must be one of {list(LIQUIDS)} in {text!r}")
    else:
        raise GoalError(
            f"unknown predicate {predicate!r} in {text!r}; valid: {sorted([*UNARY, *BINARY])}"
        )
    if HOME in args[:1] or (HOME in args and predicate not in ("inside", "on")):
        raise GoalError(f"{HOME} may only be the second argument of inside/on in {text!r}")
    q = m.group("q")
    count = int(m.group("k")) if m.group("k") else 0
    if q.startswith("count") and count < 1:
        raise GoalError(f"count>=k needs k >= 1 in {text!r}")
    if HOME in args and q != "all":
        raise GoalError(f"{HOME} names each object's own receptacle: it needs 'all' in {text!r}")
    return Clause(
        quantifier="count" if count else q,
        count=count,
        predicate="inside" if predicate == "on" else predicate,
        subject=args[0],
        target=args[1] if len(args) == 2 else None,
        value=m.group("v") != "false",
    )


def matches(world: World, index: int, ref: str) -> bool:
    """Whether object ``index`` is the one ``ref`` names (an objectId) or of type ``ref``."""
    spec = world.specs[index]
    return spec.object_id == ref if "|" in ref else spec.object_type == ref


def holds_for(world: World, predicate: str, index: int, target: str | None) -> bool:
    """Whether the predicate is true of object ``index`` now (value ``true``)."""
    st = world.objs[index]
    if not st.active and predicate != "isSliced":
        return False
    if predicate in UNARY:
        return bool(getattr(st, UNARY[predicate]))
    if predicate == "filledWith":
        return st.is_filled and st.fill_liquid == target
    if world.carrier(index) >= 0:
        return False
    return any(matches(world, p, target) for p in world.ancestors(index))  # type: ignore[arg-type]


def holds(world: World, atom: Atom) -> bool:
    """Evaluate one atom on the current state."""
    if atom.at_least:
        # world.specs is read afresh: objects created during the episode (slices) count.
        n = sum(
            1
            for s in world.specs
            if matches(world, s.index, atom.subject)
            and holds_for(world, atom.predicate, s.index, atom.target) == atom.value
        )
        return n >= atom.at_least
    index = world.index_of.get(atom.subject, -1)
    return index >= 0 and holds_for(world, atom.predicate, index, atom.target) == atom.value


def ground(
    clauses: list[Clause],
    world: World,
    homes: dict[str, str],
    reachable: Callable[[int], bool] = lambda index: True,
) -> list[Atom]:
    """The checklist of an episode: :func:`ground_clauses`, flattened in clause order."""
    return [a for group in ground_clauses(clauses, world, homes, reachable) for a in group]


def ground_clauses(
    clauses: list[Clause],
    world: World,
    homes: dict[str, str],
    reachable: Callable[[int], bool] = lambda index: True,
) -> list[list[Atom]]:
    """Each clause's atoms on an episode. ``homes`` maps objectIds to their recorded
    receptacles; ``reachable`` tells whether an agent can ever see an object (objects nobody
    can reach are left out of ``all`` clauses, and a type-level target needs one reachable
    instance). ``any`` and ``count>=k`` clauses ground to type-level atoms whatever the scene
    holds now; whether enough objects can satisfy them is
    :mod:`benchmark.tasks.goal_rules`' concern.

    An ``all`` clause over a type the scene holds no object of holds vacuously: it grounds
    to no atom, and its target need not exist.

    Raises GoalError if a clause has nothing to refer to in this scene: an objectId that is
    not there, objects of its type that nobody can reach (or, with ``@home``, none with a
    reachable recorded receptacle), a target type nobody can reach for a clause with atoms;
    or if every clause grounds to no atom: such an episode would be over before it began.
    """
    out: list[list[Atom]] = []
    for c in clauses:
        group = _ground_one(c, world, homes, reachable)
        if c.target and c.predicate == "inside" and c.target != HOME and group:
            targets = [s.index for s in world.specs if matches(world, s.index, c.target)]
            if not any(reachable(t) for t in targets):
                raise GoalError(f"no reachable {c.target} in {world.scene.name}")
        out.append(group)
    if clauses and not any(out):
        kinds = ", ".join(dict.fromkeys(c.subject for c in clauses))
        raise GoalError(
            f"every goal clause grounds to no atom in {world.scene.name} (it has no {kinds}): "
            "'all' over no object holds vacuously, so there is nothing to do"
        )
    return out


def _ground_one(
    c: Clause, world: World, homes: dict[str, str], reachable: Callable[[int], bool]
) -> list[Atom]:
    """One clause's atoms (see :func:`ground_clauses`)."""
    if c.quantifier == "count":
        return [Atom(c.predicate, c.subject, c.target, c.value, j) for j in range(1, c.count + 1)]
    if c.quantifier == "any" and world.facts.is_derived(c.subject):
        return [Atom(c.predicate, c.subject, c.target, c.value, 1)]
    if c.quantifier == "all" and world.facts.is_derived(c.subject):
        raise GoalError(
            f"'{c.text}': no {c.subject} exists when the episode starts, so 'all' is "
            "ill-defined; use 'any:' or 'count>=k:'"
        )
    present = [
        s for s in world.specs if world.objs[s.index].active and matches(world, s.index, c.subject)
    ]
    if not present and c.quantifier == "all" and "|" not in c.subject:
        return []  # 'all' over a type the scene lacks holds vacuously
    subjects = [s for s in present if reachable(s.index)]
    if not subjects:
        there = f" ({len(present)} there, none in sight of a reachable pose)" if present else ""
        raise GoalError(f"no reachable {c.subject} in {world.scene.name}{there}")
    if c.quantifier == "any":
        return [Atom(c.predicate, c.subject, c.target, c.value, 1)]
    if c.target == HOME:
        # Objects recorded resting in no receptacle (or in one nobody reaches) are left out.
        subjects = [
            s
            for s in subjects
            if s.object_id in homes and reachable(world.index_of[homes[s.object_id]])
        ]
        if not subjects:
            raise GoalError(f"no {c.subject} in {world.scene.name} has a recorded receptacle")
    return [
        Atom(
            c.predicate, s.object_id, homes[s.object_id] if c.target == HOME else c.target, c.value
        )
        for s in subjects
    ]
