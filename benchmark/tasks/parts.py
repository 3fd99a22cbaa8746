"""Parts of a task file that name single floor plans or other suites, parsed and validated.

* ``setup.place``: objects put at recorded points when an episode is built on a floor plan,
  with AI2-THOR's PlaceObjectAtPoint semantics (:mod:`benchmark.sim.placing`). This is how a
  task reproduces another suite's pre-initialisation (MAP-THOR's ``FloorPlanN.py`` files).
* ``scene_goals``: goal clauses that hold on one floor plan only, added to the task's ``goal``
  there (a suite that defines "the table" or "everything on the table" floor plan by floor plan).
* ``source``: the suite a task is taken from, its name there and its ambiguity level there.

Every check names the file and the field; objectIds are checked against the recorded iTHOR
scene they are given for.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from benchmark.sim.catalog import normalize_scene
from benchmark.sim.scene_cache import ensure_scene_assets
from benchmark.tasks.goal_rules import clause_problem
from benchmark.tasks.goals import Clause, GoalError, parse_clause

SOURCE_LEVELS = (1, 2, 3, 4)  # MAP-THOR's ambiguity levels (explicit ... implicit)
_SUITE = re.compile(r"^[a-z][a-z0-9_-]*$")


@dataclass(frozen=True)
class Placement:
    """One object put at a point when an episode is built (PlaceObjectAtPoint).

    Attributes:
        object: an objectId of the recorded scene, or a type the scene holds exactly one of.
        position: the point (x, y, z) in metres; the object rests on the surface below it.
    """

    object: str
    position: tuple[float, float, float]


@dataclass(frozen=True)
class Source:
    """Where a task comes from: ``suite`` (e.g. ``mapthor``), the task's ``name`` there and,
    optionally, its ambiguity ``level`` there (1-4)."""

    suite: str
    name: str
    level: int | None = None


class PartError(ValueError):
    """A per-floor-plan part or the source tag is malformed: ``field`` and ``expected``."""

    def __init__(self, field: str, expected: str, got: Any = None) -> None:
        super().__init__(field, expected, got)
        self.field, self.expected, self.got = field, expected, got


@cache
def recorded_objects(scene: str) -> dict[str, dict[str, Any]]:
    """The recorded objects of an iTHOR scene by objectId (type and capability flags)."""
    path = ensure_scene_assets() / f"{normalize_scene(scene)}.json"
    return {
        rec["objectId"]: {"type": rec["objectType"], "pickupable": rec["pickupable"]}
        for rec in json.loads(path.read_text())["objects"]
    }


def _scene_key(key: Any, candidates: list[str], field: str) -> str:
    try:
        scene = normalize_scene(key) if isinstance(key, str) else None
    except ValueError:
        scene = None
    if scene is None or scene not in candidates:
        raise PartError(field, f"a floor plan of the task's scenes {candidates}", key)
    return scene


def _point(value: Any, field: str) -> tuple[float, float, float]:
    if (
        not isinstance(value, list)
        or len(value) != 3
        or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in value
        )
    ):
        raise PartError(field, "a list of three finite numbers [x, y, z] (metres)", value)
    return float(value[0]), float(value[1]), float(value[2])


def _placed_object(ref: Any, scene: str, field: str) -> str:
    """Check that ``ref`` names one pickupable object of the recorded ``scene``."""
    if not isinstance(ref, str) or not ref:
        raise PartError(field, "an objectId or an object type", ref)
    objects = recorded_objects(scene)
    if "|" in ref:
        if ref not in objects:
            raise PartError(field, f"an objectId of the recorded {scene}", ref)
        matching = [ref]
    else:
        matching = [oid for oid, rec in objects.items() if rec["type"] == ref]
        if len(matching) != 1:
            raise PartError(
                field,
                f"a type {scene} holds exactly one of ({len(matching)} {ref} there; "
                "give an objectId)",
                ref,
            )
    if not objects[matching[0]]["pickupable"]:
        raise PartError(
            field, "a pickupable object (PlaceObjectAtPoint moves only those)", matching[0]
        )
    return ref


def _per_plan(
    data: Any, candidates: list[str], field: str, items: str, parse_item: Any
) -> dict[str, tuple]:
    """A mapping floor plan -> non-empty list, each item read by ``parse_item(item, scene,
    where)``; one entry per floor plan (``FloorPlan1`` and ``FloorPlan1_physics`` are one)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PartError(field, f"a mapping floor plan -> list of {items}", data)
    out: dict[str, tuple] = {}
    for key, values in data.items():
        scene = _scene_key(key, candidates, f"{field}.{key}")
        if scene in out:
            raise PartError(f"{field}.{key}", f"one entry per floor plan ({scene} is given twice)")
        if not isinstance(values, list) or not values:
            raise PartError(f"{field}.{key}", f"a non-empty list of {items}", values)
        out[scene] = tuple(
            parse_item(value, scene, f"{field}.{key}[{k}]") for k, value in enumerate(values)
        )
    return out


def _placement(item: Any, scene: str, where: str) -> Placement:
    if not isinstance(item, dict) or set(item) != {"object", "position"}:
        raise PartError(where, "a mapping with 'object' and 'position'", item)
    return Placement(
        _placed_object(item["object"], scene, f"{where}.object"),
        _point(item["position"], f"{where}.position"),
    )


def parse_place(data: Any, candidates: list[str]) -> dict[str, tuple[Placement, ...]]:
    """``setup.place``: floor plan -> placements in the order they apply."""
    return _per_plan(
        data, candidates, "setup.place", "placements {object: ..., position: [x, y, z]}", _placement
    )


def _clause_ids(clause: Clause) -> list[str]:
    return [ref for ref in (clause.subject, clause.target or "") if "|" in ref]


def _scene_clause(text: Any, scene: str, where: str) -> Clause:
    try:
        clause = parse_clause(text)
    except GoalError as err:
        raise PartError(where, f"a goal clause ({err})", text) from err
    problem = clause_problem(clause)
    if problem is not None:
        raise PartError(where, f"a clause that can hold ({problem})", text)
    for oid in _clause_ids(clause):
        if oid not in recorded_objects(scene):
            raise PartError(where, f"objectIds of the recorded {scene}", oid)
    return clause


def parse_scene_goals(data: Any, candidates: list[str]) -> dict[str, tuple[Clause, ...]]:
    """``scene_goals``: floor plan -> clauses added to the task's goal there."""
    return _per_plan(data, candidates, "scene_goals", "goal clauses", _scene_clause)


def parse_source(data: Any) -> Source | None:
    """``source``: ``{suite, name, level}`` (level optional, 1-4)."""
    if data is None:
        return None
    if not isinstance(data, dict) or not {"suite", "name"} <= set(data) <= {
        "suite",
        "name",
        "level",
    }:
        raise PartError("source", "a mapping with 'suite', 'name' and optional 'level'", data)
    if not isinstance(data["suite"], str) or not _SUITE.match(data["suite"]):
        raise PartError("source.suite", "a lower-case suite name such as mapthor", data["suite"])
    if not isinstance(data["name"], str) or not data["name"].strip():
        raise PartError("source.name", "the task's name in its suite", data["name"])
    level = data.get("level")
    if level is not None and (type(level) is not int or level not in SOURCE_LEVELS):
        raise PartError("source.level", f"one of {list(SOURCE_LEVELS)}", level)
    return Source(data["suite"], data["name"], level)
