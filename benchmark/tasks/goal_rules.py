"""Which goal clauses the simulator's own rules can satisfy, so that a task never asks agents
for something the simulator refuses.

Two checks, each with an error naming the clause and the rule it breaks:

* :func:`clause_problem`, when a task is loaded, by object type: over every recorded iTHOR
  instance of the type, and for a type created by an action, the properties the simulator gives
  its pieces (``scenes/derived_objects.yaml``). A clause whose state no object of its type can
  change (``isToggled(Sofa)``) is rejected, whether it would start true or false: agents could
  never bring it about. So is ``inside(X, Y)`` when no chain of receptacles the table in
  ``scenes/receptacles.yaml`` allows leads from an X into a Y.
* :func:`check_clause`, when an episode is built, by instance on the arranged world: properties
  differ within a type (some Sinks are not receptacles), and reachability, tools and counts are
  only known there. An atom that holds already is never rejected.

:func:`setup_problem` checks a task's ``setup`` lists the same way when it is loaded (``open``
names openable types, ``dirty`` dirtyable ones, ...), and :func:`vacuous_when_absent` says which
clauses hold vacuously in a scene without their subject type.

``inside(X, Y)`` holds when X rests in Y directly or nested, so X may also reach Y inside a
receptacle that is put in Y (a Statue in a Box on a Sofa) or that rests in Y already (as
recorded, or as the episode was arranged). Objects created by an action count as made from
reachable sources: by slicing (the agent holds one of the slicing tools, which must be
reachable too) or breaking.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache

from benchmark.sim.catalog import ithor_scenes, type_of_id
from benchmark.sim.facts import Derivation, ObjectFacts, object_facts
from benchmark.sim.scene_cache import ensure_scene_assets
from benchmark.sim.world import World
from benchmark.tasks.goals import HOME, Atom, Clause, GoalError, holds_for, matches

# ObjectSpec field -> the recorded metadata key it comes from.
CAPABILITIES = {
    "pickupable": "pickupable",
    "receptacle": "receptacle",
    "openable": "openable",
    "toggleable": "toggleable",
    "sliceable": "sliceable",
    "cookable": "cookable",
    "breakable": "breakable",
    "dirtyable": "dirtyable",
    "can_fill": "canFillWithLiquid",
}
# Predicate -> the capability an object needs for any action to change it, and that rule.
NEEDS = {
    "inside": ("pickupable", "PickupObject needs a pickupable object and only a held one is put"),
    "isToggled": ("toggleable", "ToggleObjectOn/Off act only on toggleable objects"),
    "isOpen": ("openable", "OpenObject/CloseObject act only on openable objects"),
    "isSliced": ("sliceable", "SliceObject acts only on sliceable objects"),
    "isCooked": ("cookable", "CookObject and switched-on heat sources cook only cookable objects"),
    "isDirty": ("dirtyable", "DirtyObject, CleanObject and running water need dirtyable objects"),
    "isFilledWithLiquid": ("can_fill", "only objects that canFillWithLiquid are ever filled"),
    "filledWith": ("can_fill", "only objects that canFillWithLiquid are ever filled"),
}
# States no action reverts (slicing and cooking are for good).
ONE_WAY = {"isSliced": "sliced", "isCooked": "cooked"}


class ImpossibleGoal(GoalError):
    """A goal clause the simulator's rules can never satisfy; the message names the rule."""


@cache
def type_capabilities() -> dict[str, frozenset[str]]:
    """Object type -> the capabilities (ObjectSpec flags) at least one recorded iTHOR instance
    of it has; types created by actions get the flags the simulator gives their pieces."""
    directory = ensure_scene_assets()
    found: dict[str, set[str]] = {}
    for scene in ithor_scenes():
        for rec in json.loads((directory / f"{scene}.json").read_text())["objects"]:
            caps = found.setdefault(rec["objectType"], set())
            caps.update(name for name, key in CAPABILITIES.items() if rec[key])
    out = {kind: frozenset(caps) for kind, caps in found.items()}
    facts = object_facts()
    for kind in {c.into for c in (*facts.slicing.values(), *facts.breaking.values())}:
        out[kind] = derived_capabilities(facts, kind)
    return out


def derived_capabilities(facts: ObjectFacts, kind: str) -> frozenset[str]:
    """The flags of a piece of ``kind`` as the simulator creates it: pickupable and cookable
    from ``scenes/derived_objects.yaml``, nothing else."""
    props = facts.derived_types.get(kind, {})
    flags = {"pickupable": props.get("pickupable", True), "cookable": props.get("cookable", False)}
    return frozenset(name for name, on in flags.items() if on)


def _type_of(ref: str) -> str:
    return type_of_id(ref) if "|" in ref else ref


def _ways(derivations: list[Derivation]) -> str:
    return " or ".join(
        f"{'slicing' if d.action == 'SliceObject' else 'breaking'} a {d.source}"
        + (f" with a {' or '.join(sorted(d.tools))}" if d.tools else "")
        for d in derivations
    )


# ----------------------------------------------------------------------------- by type
# setup key -> the capability an object needs for the set-up to act on it, and why.
SETUP_NEEDS = {
    "switch_on": ("toggleable", "only toggleable objects are switched on"),
    "open": ("openable", "only openable objects are opened"),
    "dirty": ("dirtyable", "only dirtyable objects get dirty"),
    "hide": ("pickupable", "only pickupable objects are moved"),
    "displace": ("pickupable", "only pickupable objects are moved"),
    "heavy": ("pickupable", "only pickupable objects are lifted"),
}


def setup_problem(key: str, kind: str) -> str | None:
    """Why ``setup.<key>`` naming object type ``kind`` would act on nothing in any scene, or
    None. (In a scene without a ``kind`` it acts on nothing, which is fine.)"""
    caps = type_capabilities()
    if kind not in caps:
        return f"{kind} is not an object type of any iTHOR scene"
    if object_facts().is_derived(kind):
        return f"no {kind} exists when an episode starts: it is made by an action"
    capability, rule = SETUP_NEEDS[key]
    if capability not in caps[kind]:
        return f"no {kind} has {CAPABILITIES[capability]}=true ({rule})"
    return None


def vacuous_when_absent(clause: Clause) -> bool:
    """Whether the clause grounds to no atom, and so holds, in a scene without its subject:
    an ``all`` clause over a type (see :func:`benchmark.tasks.goals.ground_clauses`)."""
    return clause.quantifier == "all" and "|" not in clause.subject


def clause_needs(clause: Clause) -> list[tuple[frozenset[str], ...]]:
    """Object types a scene must hold for the clause, as requirements that each list
    alternatives (a scene meets one when it holds every type of one alternative). A type
    created by an action needs a source, and the tool when its derivation needs one."""
    facts = object_facts()
    needs: list[tuple[frozenset[str], ...]] = []
    if "|" not in clause.subject:
        ways = facts.derivations(clause.subject)
        if ways:
            needs.append(
                tuple(
                    frozenset({d.source, *([tool] if tool else [])})
                    for d in ways
                    for tool in (sorted(d.tools) or [""])
                )
            )
        else:
            needs.append((frozenset({clause.subject}),))
    if clause.predicate == "isSliced" and clause.value:
        needs.append(tuple(frozenset({tool}) for tool in sorted(facts.slicing_tools)))
    target = clause.target or ""
    if clause.predicate == "inside" and target != HOME and "|" not in target:
        needs.append((frozenset({target}),))
    return needs


def _type_places(target: str, facts: ObjectFacts, caps: dict[str, frozenset[str]]) -> set[str]:
    """Types an object can rest in and thereby be in a ``target``: the target, and receptacle
    types the table lets rest in one of those (put there, or recorded there for good)."""
    places = {target}
    grew = True
    while grew:
        grew = False
        for kind, flags in caps.items():
            if (
                kind not in places
                and "receptacle" in flags
                and any(facts.accepts(p, kind) for p in places)
            ):
                places.add(kind)
                grew = True
    return places


def clause_problem(clause: Clause) -> str | None:
    """Why no object of the clause's types could ever satisfy it, or None."""
    facts, caps = object_facts(), type_capabilities()
    subject = _type_of(clause.subject)
    named = [subject]
    if clause.predicate == "inside" and clause.target != HOME:
        named.append(_type_of(clause.target or ""))
    for kind in named:
        if kind not in caps:
            return (
                f"{kind} is not an object type of any iTHOR scene, nor one "
                "scenes/derived_objects.yaml creates"
            )
    ways = facts.derivations(subject)
    if ways and clause.quantifier == "all":
        return (
            f"no {subject} exists when an episode starts (it is made by {_ways(ways)}), so "
            "'all' over it is ill-defined; use 'any:' or 'count>=k:'"
        )
    capability, rule = NEEDS[clause.predicate]
    sources = [d.source for d in ways]
    able = capability in caps[subject]
    if clause.predicate == "isCooked":  # pieces keep the cooked state of what they came from
        able = able or any(capability in caps.get(s, ()) for s in sources)
    if not able and clause.predicate != "inside":
        return (
            f"no {subject} has {CAPABILITIES[capability]}=true, so {clause.predicate}({subject}) "
            f"never changes: {rule}"
        )
    if clause.predicate != "inside":
        return None
    if not clause.value or clause.target == HOME:
        return None if able else f"no {subject} has pickupable=true: {rule}"
    target = _type_of(clause.target or "")
    places = _type_places(target, facts, caps)
    movers = ([subject] if able else []) + sources  # pieces rest where their source was
    if any(facts.accepts(p, m) for p in places for m in movers):
        return None
    if not movers:
        return f"no {subject} has pickupable=true: {rule}"
    takers = sorted(r for r, kinds in facts.compatible.items() if subject in kinds)
    return (
        f"a {subject} can be put only in {', '.join(takers) or 'nothing'} "
        f"(scenes/receptacles.yaml, as PutObject applies it), and none of these is a {target} "
        f"or can come to rest in one"
    )


# ----------------------------------------------------------------------------- by instance
class _Scene:
    """Per-episode queries, cached for one check."""

    def __init__(self, world: World, reachable: Callable[[int], bool]) -> None:
        self.world = world
        self._reachable = reachable
        self._seen: dict[int, bool] = {}
        self._places: dict[str, set[int]] = {}

    def reachable(self, index: int) -> bool:
        if index not in self._seen:
            self._seen[index] = self._reachable(index)
        return self._seen[index]

    def inside_now(self, index: int, target: str) -> bool:
        w = self.world
        return w.carrier(index) < 0 and any(matches(w, p, target) for p in w.ancestors(index))

    def places(self, target: str) -> set[int]:
        """Reachable receptacles in which an object rests in ``target``: a target itself, one
        resting in a target now, or a pickupable one that can be put in such a place."""
        if target not in self._places:
            w = self.world
            candidates = [s for s in w.specs if s.receptacle and w.objs[s.index].active]
            places = {
                s.index
                for s in candidates
                if (matches(w, s.index, target) or self.inside_now(s.index, target))
                and self.reachable(s.index)
            }
            grew = True
            while grew:
                grew = False
                for s in candidates:
                    if s.index in places or not s.pickupable or not self.reachable(s.index):
                        continue
                    if any(w.facts.accepts(w.specs[p].object_type, s.object_type) for p in places):
                        places.add(s.index)
                        grew = True
            self._places[target] = places
        return self._places[target]

    def not_receptacle(self, target: str) -> str:
        """A note when no object ``target`` names is a receptacle (PutObject needs one)."""
        w = self.world
        named = [s for s in w.specs if matches(w, s.index, target)]
        if not named or any(s.receptacle for s in named):
            return ""
        return f" ({', '.join(s.object_id for s in named)}: not a receptacle here)"

    def can_put(self, kind: str, target: str, exclude: int = -1) -> bool:
        w = self.world
        return any(
            p != exclude and w.facts.accepts(w.specs[p].object_type, kind)
            for p in self.places(target)
        )


def _instance_problem(q: _Scene, clause: Clause, index: int, target: str | None) -> str | None:
    """Why object ``index`` can never satisfy the clause with this target, or None."""
    w = q.world
    spec, st = w.specs[index], w.objs[index]
    if holds_for(w, clause.predicate, index, target) == clause.value:
        return None
    capability, rule = NEEDS[clause.predicate]
    if not getattr(spec, capability):
        return f"{spec.object_id} has {CAPABILITIES[capability]}=false ({rule})"
    if clause.predicate == "inside":
        if clause.value and not q.can_put(spec.object_type, target or "", exclude=index):
            return (
                f"no reachable receptacle that accepts a {spec.object_type} (scenes/receptacles"
                f".yaml, as PutObject applies it) is, or can come to rest in, a {target}"
                + q.not_receptacle(target or "")
            )
        return None
    if clause.predicate in ONE_WAY and not clause.value:
        return f"{spec.object_id} is already {ONE_WAY[clause.predicate]}, which is for good"
    fills = clause.predicate in ("isFilledWithLiquid", "filledWith") and clause.value
    if st.is_broken and (clause.predicate == "isToggled" or fills):
        return f"{spec.object_id} is broken: broken objects cannot be switched or filled"
    return None


def _piece_problem(q: _Scene, clause: Clause, kind: str, source: int) -> str | None:
    """Why a piece of ``kind`` made from object ``source`` could never satisfy the clause."""
    w = q.world
    caps = derived_capabilities(w.facts, kind)
    src, st = w.specs[source], w.objs[source]
    p = clause.predicate
    if p == "inside":
        target = clause.target or ""
        if not clause.value:
            movable = "pickupable" in caps or src.pickupable
            if movable or not q.inside_now(source, target):
                return None
            return f"pieces of {src.object_id} would rest in a {target} for good"
        pieces_move = "pickupable" in caps and q.can_put(kind, target)
        source_there = q.inside_now(source, target) or (
            src.pickupable and q.can_put(src.object_type, target, exclude=source)
        )
        if pieces_move or source_there:
            return None
        return (
            f"neither a {kind} nor the {src.object_type} it is made from can come to rest "
            f"in a {target}"
        )
    if p == "isCooked":
        if not clause.value:
            return None if not st.is_cooked else f"{src.object_id} is cooked, so are its pieces"
        if "cookable" in caps or src.cookable or st.is_cooked:
            return None
        return f"neither a {kind} nor {src.object_id} has cookable=true ({NEEDS[p][1]})"
    if clause.value:  # pieces start closed, off, unsliced, clean and empty, and stay so
        return f"a {kind} has {CAPABILITIES[NEEDS[p][0]]}=false ({NEEDS[p][1]})"
    return None


def _derivable(q: _Scene, clause: Clause, kind: str) -> tuple[int, str]:
    """How many pieces of ``kind`` reachable sources can make that could satisfy the clause,
    and why sources were left out."""
    w = q.world
    made: dict[int, int] = {}
    reasons: list[str] = []
    for d in w.facts.derivations(kind):
        tools = [
            s.index
            for s in w.specs
            if s.object_type in d.tools and s.pickupable and w.objs[s.index].active
        ]
        if d.tools and not any(q.reachable(t) for t in tools):
            reasons.append(f"no reachable {' or '.join(sorted(d.tools))} to slice with")
            continue
        capability = "sliceable" if d.action == "SliceObject" else "breakable"
        for s in w.specs:
            st = w.objs[s.index]
            if s.object_type != d.source or not st.active or not q.reachable(s.index):
                continue
            if not getattr(s, capability) or st.is_sliced or st.is_broken:
                done = "sliced" if d.action == "SliceObject" else "broken"
                reasons.append(f"{s.object_id} has {capability}=false or is already {done}")
                continue
            problem = _piece_problem(q, clause, kind, s.index)
            if problem is not None:
                reasons.append(problem)
                continue
            made[s.index] = max(made.get(s.index, 0), d.count)
    return sum(made.values()), "; ".join(dict.fromkeys(reasons))


def check_clause(
    world: World, clause: Clause, atoms: list[Atom], reachable: Callable[[int], bool]
) -> None:
    """Raise ImpossibleGoal if the clause, grounded to ``atoms`` on the arranged ``world``,
    can never be satisfied: an ``all`` atom's object cannot take the state, or fewer objects
    (or pieces reachable sources can make) than ``any``/``count>=k`` needs can."""
    q = _Scene(world, reachable)
    where = f"'{clause.text}' can never hold in {world.scene.name}"
    if clause.quantifier == "all":
        for atom in atoms:
            problem = _instance_problem(q, clause, world.index_of[atom.subject], atom.target)
            if problem is not None:
                raise ImpossibleGoal(f"{where}: {problem}")
        return
    need = max(1, clause.count)
    kind = _type_of(clause.subject)
    if "|" not in clause.subject and world.facts.is_derived(kind):
        made, why = _derivable(q, clause, kind)
        if made < need:
            ways = _ways(world.facts.derivations(kind))
            raise ImpossibleGoal(
                f"{where}: it needs {need} {kind}, made by {ways}, and the reachable sources "
                f"can make {made} that could satisfy it" + (f" ({why})" if why else "")
            )
        return
    able, reasons = 0, []
    for s in world.specs:
        if not world.objs[s.index].active or not matches(world, s.index, clause.subject):
            continue
        if not q.reachable(s.index):
            continue
        problem = _instance_problem(q, clause, s.index, clause.target)
        if problem is None:
            able += 1
        else:
            reasons.append(problem)
    if able < need:
        why = "; ".join(dict.fromkeys(reasons)) or f"no reachable {clause.subject}"
        raise ImpossibleGoal(
            f"{where}: it needs {need} objects that could satisfy it, {able} can ({why})"
        )
