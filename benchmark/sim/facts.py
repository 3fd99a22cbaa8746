"""The benchmark's own object facts, read from ``scenes/``: receptacle compatibility, objects
created by actions, and the scene splits."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from benchmark.paths import SCENES_DATA_DIR


@dataclass(frozen=True)
class Transformation:
    """What an action turns an object type into: ``count`` pieces of type ``into``."""

    into: str
    count: int


@dataclass(frozen=True)
class Derivation:
    """One way to create objects of a derived type: ``action`` on a ``source`` object makes
    ``count`` of them; ``tools`` are the types one of which the agent must hold (none: empty)."""

    source: str
    action: str  # SliceObject | BreakObject
    count: int
    tools: frozenset[str]


@dataclass(frozen=True)
class ObjectFacts:
    """Facts the recorded scenes cannot provide.

    Attributes:
        compatible: receptacle type -> object types that may rest in or on it.
        slicing: sliceable type -> the pieces slicing creates.
        breaking: breakable type -> the pieces breaking creates (types absent here just break).
        slicing_tools: object types an agent must hold to slice.
        derived_types: created type -> its property overrides (pickupable, cookable, ...).
    """

    compatible: dict[str, frozenset[str]]
    slicing: dict[str, Transformation]
    breaking: dict[str, Transformation]
    slicing_tools: frozenset[str]
    derived_types: dict[str, dict]

    def accepts(self, receptacle_type: str, object_type: str) -> bool:
        return object_type in self.compatible.get(receptacle_type, ())

    def derivations(self, object_type: str) -> list[Derivation]:
        """The ways to create ``object_type`` (empty for a type recorded scenes hold)."""
        out = [
            Derivation(source, "SliceObject", change.count, self.slicing_tools)
            for source, change in self.slicing.items()
            if change.into == object_type
        ]
        out += [
            Derivation(source, "BreakObject", change.count, frozenset())
            for source, change in self.breaking.items()
            if change.into == object_type
        ]
        return out

    def is_derived(self, object_type: str) -> bool:
        """Whether objects of this type exist only after an action (slicing, breaking)."""
        return bool(self.derivations(object_type))


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ValueError(f"{path}: not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping at the top level")
    return data


def _transformations(path: Path, data: dict, key: str) -> dict[str, Transformation]:
    out = {}
    for source, spec in (data.get(key) or {}).items():
        if not isinstance(spec, dict) or not isinstance(spec.get("into"), str):
            raise ValueError(f"{path}: field {key}.{source} needs a string 'into'")
        count = spec.get("count", 1)
        if not isinstance(count, int) or count < 1:
            raise ValueError(f"{path}: field {key}.{source}.count must be a positive integer")
        out[source] = Transformation(spec["into"], count)
    return out


@cache
def object_facts(data_dir: Path = SCENES_DATA_DIR) -> ObjectFacts:
    """Load and validate the facts in ``scenes/`` (cached)."""
    rec_path = data_dir / "receptacles.yaml"
    rec = _read_yaml(rec_path)
    table = rec.get("receptacles")
    if not isinstance(table, dict):
        raise ValueError(f"{rec_path}: field 'receptacles' must map receptacle types to lists")
    compatible = {}
    for receptacle, types in table.items():
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise ValueError(f"{rec_path}: field receptacles.{receptacle} must be a list of types")
        compatible[receptacle] = frozenset(types)
    der_path = data_dir / "derived_objects.yaml"
    der = _read_yaml(der_path)
    return ObjectFacts(
        compatible=compatible,
        slicing=_transformations(der_path, der, "slicing"),
        breaking=_transformations(der_path, der, "breaking"),
        slicing_tools=frozenset(der.get("slicing_tools") or ()),
        derived_types=dict(der.get("types") or {}),
    )


@cache
def scene_splits(data_dir: Path = SCENES_DATA_DIR) -> dict[str, list[str]]:
    """Split name -> iTHOR scene names, from ``scenes/splits.yaml``."""
    from benchmark.sim.catalog import ROOM_TYPES

    path = data_dir / "splits.yaml"
    ranges = _read_yaml(path).get("ranges")
    if not isinstance(ranges, dict):
        raise ValueError(f"{path}: field 'ranges' must map split names to [first, last]")
    out = {}
    for split, bounds in ranges.items():
        if not (
            isinstance(bounds, list) and len(bounds) == 2 and 1 <= bounds[0] <= bounds[1] <= 30
        ):
            raise ValueError(f"{path}: field ranges.{split} must be [first, last] within 1..30")
        out[split] = [
            f"FloorPlan{first - 1 + k}"
            for _, first in ROOM_TYPES
            for k in range(bounds[0], bounds[1] + 1)
        ]
    return out
