"""Task specs: declarative YAML files, one per versioned task id, under ``tasks/<family>/``.

A file ``tasks/transport/transport_produce_fridge_v0.yaml`` defines the task
``transport_produce_fridge_v0``. A malformed file is rejected with a :class:`TaskSpecError`
naming the file, the field and what was expected; so is a goal clause the simulator's rules
can never satisfy (see :mod:`benchmark.tasks.goal_rules`). Adding a task needs no code change.

A task file outside ``tasks/`` can be used by its path (:func:`resolve_task`); it is then
identified by that path and the SHA-256 of its content (:func:`task_source`), which traces
and result rows record so that replay rebuilds exactly the same task.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from benchmark.paths import TASKS_DIR
from benchmark.sim.catalog import ROOM_TYPES, ithor_scenes, normalize_scene
from benchmark.sim.facts import scene_splits
from benchmark.sim.initialize import MAX_AGENTS
from benchmark.sim.scene import object_type_counts
from benchmark.skills import skill_names
from benchmark.tasks.goal_rules import (
    clause_needs,
    clause_problem,
    setup_problem,
    vacuous_when_absent,
)
from benchmark.tasks.goals import Clause, GoalError, parse_clause
from benchmark.tasks.parts import (
    PartError,
    Placement,
    Source,
    parse_place,
    parse_scene_goals,
    parse_source,
)

FAMILIES = ("transport", "rearrange", "prepare", "search", "heavy-lift", "switch-off")
AMBIGUITY_LEVELS = ("explicit", "types", "implicit")
_ID = re.compile(r"^[a-z][a-z0-9_]*_v\d+$")
_TOP_FIELDS = {
    "requires",
    "id",
    "family",
    "instructions",
    "scenes",
    "agents",
    "capabilities",
    "limits",
    "setup",
    "goal",
    "scene_goals",
    "source",
    "description",
}
_SETUP_FIELDS = {"randomize", "place", "open", "hide", "displace", "dirty", "switch_on", "heavy"}


class TaskSpecError(ValueError):
    """A task file is malformed."""


@dataclass(frozen=True)
class Capability:
    """An agent profile: the skills it cannot use."""

    name: str
    cannot: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Setup:
    """How an episode's initial state is varied from the recorded scene.

    Attributes:
        randomize: re-place every pickupable object among compatible receptacles.
        place: floor plan -> objects put at recorded points there (PlaceObjectAtPoint), in order.
        open: openable types opened at the start.
        hide: types put inside closed receptacles (search tasks).
        displace: types moved away from their recorded receptacle (rearrange tasks).
        dirty: dirtyable types made dirty at the start.
        switch_on: toggleable types switched on at the start (switch-off tasks).
        heavy: types only a joint ``lift`` by two agents can pick up (heavy-lift tasks).

    They apply in this order, so a receptacle something is hidden in starts closed even if
    ``open`` names its type, and running water or heat that ``switch_on`` starts acts on what
    ``dirty`` made dirty. Placements apply right after ``randomize``.
    """

    randomize: bool = True
    place: dict[str, tuple[Placement, ...]] = field(default_factory=dict)
    open: tuple[str, ...] = ()
    hide: tuple[str, ...] = ()
    displace: tuple[str, ...] = ()
    dirty: tuple[str, ...] = ()
    switch_on: tuple[str, ...] = ()
    heavy: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaskSpec:
    """One versioned task. See ``tasks/README.md`` for the file format."""

    id: str
    family: str
    instructions: dict[str, str]
    room_types: tuple[str, ...]
    scene_list: tuple[str, ...]
    min_agents: int
    max_agents: int
    capabilities: tuple[Capability, ...]
    max_ticks: int
    max_decisions: int
    setup: Setup
    goal: tuple[Clause, ...]
    requires: tuple[str, ...] = ()
    scene_goals: dict[str, tuple[Clause, ...]] = field(default_factory=dict)
    source: Source | None = None
    path: str = field(default="", compare=False)  # the file it was loaded from
    sha256: str = field(default="", compare=False)  # SHA-256 of that file's content

    @property
    def version(self) -> int:
        return int(self.id.rsplit("_v", 1)[1])

    def goal_for(self, scene: str) -> tuple[Clause, ...]:
        """The goal on ``scene``: the clauses of every scene, then that floor plan's own."""
        return self.goal + self.scene_goals.get(scene, ())

    def candidate_scenes(self) -> list[str]:
        if self.scene_list:
            return list(self.scene_list)
        return [s for rt in self.room_types for s in ithor_scenes(rt)]

    def eligible_scenes(self, split: str | None = None) -> list[str]:
        """Candidate scenes (optionally within a split) where the goal has something to do.

        A scene must hold every type an ``any``/``count>=k`` clause needs (for a type made by
        an action, its source and a tool if needed), and the ``requires`` and ``heavy`` types.
        An ``all`` clause over a type the scene lacks holds vacuously, so it needs nothing;
        one whose subject is there needs the rest (its target, a slicing tool). At least one
        clause must have its subject there, or the episode would have nothing to do.
        """
        allowed = None
        if split is not None:
            splits = scene_splits()
            if split not in splits:
                raise ValueError(f"unknown split {split!r}; valid splits are {sorted(splits)}")
            allowed = set(splits[split])
        return [
            s
            for s in self.candidate_scenes()
            if (allowed is None or s in allowed) and self._fits(s, set(object_type_counts(s)))
        ]

    def _fits(self, scene: str, present: set[str]) -> bool:
        needs = [(frozenset({kind}),) for kind in (*self.setup.heavy, *self.requires)]
        something = False
        for clause in self.goal_for(scene):
            clause_has = clause_needs(clause)
            # The first need of an 'all' clause over a type is its subject.
            if vacuous_when_absent(clause) and not _meets(clause_has[:1], present):
                continue
            needs += clause_has
            something = True
        return something and _meets(needs, present)

    def capability(self, agent_index: int) -> Capability:
        """Agent i's profile (profiles repeat over the agents; none means unrestricted)."""
        if not self.capabilities:
            return Capability("default")
        return self.capabilities[agent_index % len(self.capabilities)]


def _meets(needs: list[tuple[frozenset[str], ...]], present: set[str]) -> bool:
    return all(any(option <= present for option in need) for need in needs)


def _fail(path: Path, fieldname: str, expected: str, got: Any = None) -> TaskSpecError:
    suffix = "" if got is None else f", got {got!r}"
    return TaskSpecError(f"{path}: field '{fieldname}': expected {expected}{suffix}")


def _str_list(path: Path, name: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, name, "a list of strings", value)
    return tuple(value)


def _positive_int(path: Path, name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _fail(path, name, "a positive integer", value)
    return value


def parse_task(data: Any, path: Path) -> TaskSpec:
    """Validate a task file's content; raises TaskSpecError naming the file and field."""
    if not isinstance(data, dict):
        raise TaskSpecError(f"{path}: expected a mapping at the top level")
    unknown = sorted(set(data) - _TOP_FIELDS)
    if unknown:
        raise _fail(path, unknown[0], f"one of {sorted(_TOP_FIELDS)} (unknown field)")
    task_id = data.get("id")
    if not isinstance(task_id, str) or not _ID.match(task_id):
        raise _fail(
            path, "id", "a lower-case id ending in _v<version>, e.g. transport_apples_v0", task_id
        )
    if path.stem != task_id:
        raise _fail(path, "id", f"the file name {path.stem!r}", task_id)
    family = data.get("family")
    if family not in FAMILIES:
        raise _fail(path, "family", f"one of {list(FAMILIES)}", family)
    instructions = data.get("instructions")
    if (
        not isinstance(instructions, dict)
        or set(instructions) != set(AMBIGUITY_LEVELS)
        or not all(isinstance(v, str) and v.strip() for v in instructions.values())
    ):
        raise _fail(
            path, "instructions", f"a non-empty phrasing for each of {list(AMBIGUITY_LEVELS)}"
        )
    scenes = data.get("scenes")
    room_types: tuple[str, ...] = ()
    scene_list: tuple[str, ...] = ()
    valid_rooms = [r for r, _ in ROOM_TYPES]
    if isinstance(scenes, dict) and set(scenes) == {"room_types"}:
        room_types = _str_list(path, "scenes.room_types", scenes["room_types"])
        bad = [r for r in room_types if r not in valid_rooms]
        if bad or not room_types:
            raise _fail(
                path, "scenes.room_types", f"a non-empty list from {valid_rooms}", bad or room_types
            )
    elif isinstance(scenes, dict) and set(scenes) == {"list"}:
        try:
            scene_list = tuple(
                normalize_scene(s) for s in _str_list(path, "scenes.list", scenes["list"])
            )
        except ValueError as err:
            raise _fail(path, "scenes.list", "iTHOR scene names") from err
        if not scene_list:
            raise _fail(path, "scenes.list", "at least one scene")
    else:
        raise _fail(path, "scenes", "a mapping with either 'room_types' or 'list'", scenes)
    agents = data.get("agents")
    if not isinstance(agents, dict) or set(agents) != {"min", "max"}:
        raise _fail(path, "agents", "a mapping with 'min' and 'max'", agents)
    lo, hi = (
        _positive_int(path, "agents.min", agents["min"]),
        _positive_int(path, "agents.max", agents["max"]),
    )
    if not lo <= hi <= MAX_AGENTS:
        raise _fail(path, "agents", f"1 <= min <= max <= {MAX_AGENTS}", agents)
    caps = []
    for k, cap in enumerate(data.get("capabilities") or []):
        if (
            not isinstance(cap, dict)
            or not isinstance(cap.get("name"), str)
            or set(cap) - {"name", "cannot"}
        ):
            raise _fail(
                path, f"capabilities[{k}]", "a mapping with 'name' and optional 'cannot'", cap
            )
        cannot = _str_list(path, f"capabilities[{k}].cannot", cap.get("cannot"))
        bad = [s for s in cannot if s not in skill_names()]
        if bad:
            raise _fail(
                path, f"capabilities[{k}].cannot", f"skills from {list(skill_names())}", bad
            )
        caps.append(Capability(cap["name"], frozenset(cannot)))
    limits = data.get("limits")
    if not isinstance(limits, dict) or set(limits) != {"ticks", "decisions"}:
        raise _fail(path, "limits", "a mapping with 'ticks' and 'decisions'", limits)
    setup_data = data.get("setup") or {}
    if not isinstance(setup_data, dict) or set(setup_data) - _SETUP_FIELDS:
        raise _fail(path, "setup", f"a mapping with keys from {sorted(_SETUP_FIELDS)}", setup_data)
    randomize = setup_data.get("randomize", True)
    if not isinstance(randomize, bool):
        raise _fail(path, "setup.randomize", "true or false", randomize)
    candidates = (
        list(scene_list) if scene_list else [s for rt in room_types for s in ithor_scenes(rt)]
    )
    try:
        place = parse_place(setup_data.get("place"), candidates)
        scene_goals = parse_scene_goals(data.get("scene_goals"), candidates)
        source = parse_source(data.get("source"))
    except PartError as err:
        raise _fail(path, err.field, err.expected, err.got) from err
    kinds = {}
    for key in sorted(_SETUP_FIELDS - {"randomize", "place"}):
        kinds[key] = _str_list(path, f"setup.{key}", setup_data.get(key))
        for kind in kinds[key]:
            problem = setup_problem(key, kind)
            if problem is not None:
                raise _fail(path, f"setup.{key}", f"object types it can act on: {problem}", kind)
    setup = Setup(randomize=randomize, place=place, **kinds)
    goal_data = data.get("goal", [])
    # The goal may be left empty when every scene has goal clauses of its own.
    if not isinstance(goal_data, list) or not (goal_data or set(candidates) <= set(scene_goals)):
        raise _fail(
            path, "goal", "a non-empty list of clauses like 'all: inside(Apple, Fridge)'", goal_data
        )
    goal = []
    for k, text in enumerate(goal_data):
        try:
            clause = parse_clause(text)
        except GoalError as err:
            raise TaskSpecError(f"{path}: field 'goal[{k}]': {err}") from err
        problem = clause_problem(clause)
        if problem is not None:
            raise TaskSpecError(f"{path}: field 'goal[{k}]': {text!r} can never hold: {problem}")
        goal.append(clause)
    requires = _str_list(path, "requires", data.get("requires"))
    return TaskSpec(
        id=task_id,
        family=family,
        instructions=dict(instructions),
        room_types=room_types,
        scene_list=scene_list,
        min_agents=lo,
        max_agents=hi,
        capabilities=tuple(caps),
        max_ticks=_positive_int(path, "limits.ticks", limits["ticks"]),
        max_decisions=_positive_int(path, "limits.decisions", limits["decisions"]),
        setup=setup,
        goal=tuple(goal),
        requires=requires,
        scene_goals=scene_goals,
        source=source,
        path=str(path),
    )


def load_task_file(path: str | os.PathLike[str], sha256: str | None = None) -> TaskSpec:
    """Load and validate one task file. With ``sha256``, the content must still hash to it
    (the file a trace or a run recorded); a changed file raises TaskSpecError."""
    path = Path(path)
    try:
        content = path.read_bytes()
    except OSError as err:
        raise TaskSpecError(f"{path}: cannot be read: {err}") from err
    digest = hashlib.sha256(content).hexdigest()
    if sha256 is not None and digest != sha256:
        raise TaskSpecError(
            f"{path}: the task file changed since it was recorded: its content hashes to "
            f"sha256 {digest}, the record says {sha256}; restore that version to reproduce it"
        )
    try:
        data = yaml.safe_load(content.decode())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise TaskSpecError(f"{path}: not valid YAML: {err}") from err
    return dataclasses.replace(parse_task(data, path), sha256=digest)


@cache
def task_registry(root: Path = TASKS_DIR) -> dict[str, TaskSpec]:
    """Every task under ``root``, by id. A task lives in the folder of its family, or in the
    collection folder of the suite its ``source`` names (``tasks/mapthor/``)."""
    out: dict[str, TaskSpec] = {}
    for path in sorted(root.glob("*/*.yaml")):
        spec = load_task_file(path)
        folder = path.parent.name
        if folder != spec.family and (spec.source is None or folder != spec.source.suite):
            raise TaskSpecError(
                f"{path}: field 'family': expected the folder name {folder!r} (or a "
                f"'source' whose suite is {folder!r}, for a suite's collection folder)"
            )
        if spec.id in out:
            raise TaskSpecError(f"{path}: field 'id': {spec.id!r} is defined twice")
        out[spec.id] = spec
    return out


def load_task(task_id: str) -> TaskSpec:
    """The task with this id; raises ValueError listing the known ids."""
    tasks = task_registry()
    if task_id not in tasks:
        raise ValueError(f"unknown task {task_id!r}; known tasks are {sorted(tasks)}")
    return tasks[task_id]


def is_task_path(ref: str | os.PathLike[str]) -> bool:
    """Whether a task reference is a file path rather than a registered id (ids hold no
    ``/`` and no ``.``, so a path is anything ending in .yaml/.yml or holding a separator)."""
    text = os.fspath(ref)
    return not isinstance(ref, str) or text.endswith((".yaml", ".yml")) or os.sep in text


def load_task_path(path: str | os.PathLike[str]) -> TaskSpec:
    """The task defined by a file anywhere (relative paths: from the working directory).

    A file of the registry gives the registered task. A file elsewhere must not reuse a
    registered id: results are reported by task id, and a registered id means that task.
    """
    resolved = Path(path).expanduser().resolve()
    spec = load_task_file(resolved)
    registered = task_registry().get(spec.id)
    if registered is not None:
        if Path(registered.path).resolve() == resolved:
            return registered
        raise TaskSpecError(
            f"{resolved}: field 'id': {spec.id!r} is a registered task ({registered.path}); "
            "give a task file outside tasks/ its own id (or a new _v<version>)"
        )
    return spec


TaskRef = TaskSpec | str | os.PathLike[str]  # a spec, a registered id, or a task file's path


def resolve_task(task: TaskRef) -> TaskSpec:
    """A task given as a spec, a registered id, or the path of a task file."""
    if isinstance(task, TaskSpec):
        return task
    return load_task_path(task) if is_task_path(task) else load_task(task)


def task_source(task: TaskSpec) -> dict[str, str] | None:
    """What identifies a task that is not the registered one of its id: the ``path`` of its
    file and the ``sha256`` of its content. None for a registered task (its id says it)."""
    if task_registry().get(task.id) == task:
        return None
    return {"path": str(Path(task.path).resolve()) if task.path else "", "sha256": task.sha256}
