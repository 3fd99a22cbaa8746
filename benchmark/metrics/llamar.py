"""LLaMAR's MAP-THOR episode metrics (SR, TR, C, B, L), computed the way its checker computes
them, from one of our episode traces.

LLaMAR's checker never reads the simulator state: after every action it matches the action
string, its success flag and the object the agent holds against lists of subtask strings built
when the episode starts, and its logger derives the episode metrics from those matches and from
the action log. :func:`llamar_metrics` builds those lists from the trace's checklist and runs the
trace's action log through the same rules, so both sets of metrics describe the same episode
(tasks/mapthor/README.md, "Metrics against LLaMAR's", compares them).

**Actions.** Every skill record of the trace is one LLaMAR action, the one its declaration names
(``llamar`` in :mod:`benchmark.skills.catalog`): ``navigate`` is
``NavigateTo``, ``pickup`` and ``lift`` are ``PickupObject``, ``put`` is ``PutObject`` of its
receptacle, ``open``, ``close``, ``toggle_on``, ``toggle_off`` and ``slice`` are the AI2-THOR
actions, primitive-level actions keep their AI2-THOR names, ``explore`` is a movement (like
LLaMAR's ``Move``/``Rotate``), ``wait`` is ``Idle`` and ``done`` is ``Done``; of the agents of a
joint ``lift``, only the one that ends up holding the object picked it up. An action succeeded
when its record's ``success`` is true (a rejected action failed; one still running when the
episode ended did not succeed). Objects are named ``<Type>_<k>``, k
numbering the instances of a type in the order the action log first names them (LLaMAR numbers
them in the order its team first sees them), then the checklist's other instances.

**Subtasks**, derived from the checklist as LLaMAR's checkers list them for the same goals (every
atom must name one object: ``all`` clauses and objectIds; X below is that object):

* ``inside(X, R)``: independent ``NavigateTo(X)`` and ``PickupObject(X)``; conditional, once per
  receptacle type R and object type T, ``NavigateTo(R, T)`` and ``PutObject(R, T)``, and
  ``OpenObject(R, T)`` when R is a Drawer (LLaMAR's drawer checkers ask to open it while holding
  the object);
* ``isOpen(X)=false``: ``OpenObject(X)`` and ``CloseObject(X)`` (its fridge checkers);
* ``isOpen(X)``, ``isToggled(X)``, ``isToggled(X)=false``, ``isSliced(X)``, ``isDirty(X)=false``:
  ``NavigateTo(X)`` and ``OpenObject``, ``ToggleObjectOn``, ``ToggleObjectOff``, ``SliceObject``,
  ``CleanObject`` of X.

Other predicates have no LLaMAR subtask: ValueError. The list does not depend on the state: an
atom true from the start still needs its action. LLaMAR lists an object subtask for every
instance of the type in the room; here the instances are the checklist's, which are the same
except where our goals name objectIds or leave out objects no agent can reach.

**Credit**, per action in the order the actions ended: a successful action whose string is an
independent subtask not yet credited is credited, and with it ``NavigateTo`` of its object (the
agent was close enough). Otherwise a successful ``A(R_k)``, A a conditional act, R a receptacle
type of the task, by an agent holding an object of an object type T of the task (for
``PutObject``: the object put) credits ``A(R, T)`` once per (A, R, T), whether or not that
triple is in the list, and with it ``NavigateTo(R, T)``.

**Metrics** (``SR``, ``TR``, ``C``, ``B``, ``L``):

* ``SR`` = 1 if the number of credited subtasks equals the number of subtasks (a count, not the
  same set), else 0;
* ``TR`` = credited subtasks / subtasks; it can exceed 1, since triples outside the list are
  credited too (acts at another of the task's receptacles while holding one of its objects);
* ``C`` = coverage items named by some action / coverage items. The items are the checklist's
  objects and every instance in the room of each receptacle type (``CounterTop_1`` ...
  ``CounterTop_n``); an item is named when it is a substring of the action's string, whether the
  action succeeded or not (so ``PickupObject(ButterKnife_1)`` names ``Knife_1`` and
  ``OpenObject(Cabinet_10)`` names ``Cabinet_1``);
* ``B`` = min_i a_i / max_i a_i over the agents with a_i > 0, a_i the successful actions of agent
  i other than ``Idle`` and ``Done``; agents without one are left out, and with none at all the
  formula is undefined (None);
* ``L`` = decision rounds: the most decisions any agent took. LLaMAR's steps are joint rounds of
  one action per agent, and its loop runs until every agent says ``Done`` or the step limit; our
  episodes also end on success.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.formats import TRACE_FORMAT
from benchmark.metrics.episode import episode_metrics
from benchmark.sim.catalog import type_of_id
from benchmark.sim.failures import Failure
from benchmark.sim.scene import object_type_counts
from benchmark.skills import is_joint, llamar_action

LLAMAR_METRICS = ("SR", "TR", "C", "B", "L")
NOT_COUNTED = ("Idle", "Done")  # left out of balance
STATE_ACTIONS = {  # (predicate, value) -> the action LLaMAR's checkers ask for, after NavigateTo
    ("isOpen", True): "OpenObject",
    ("isToggled", True): "ToggleObjectOn",
    ("isToggled", False): "ToggleObjectOff",
    ("isSliced", True): "SliceObject",
    ("isDirty", False): "CleanObject",
}
CONDITIONAL_ACTS = ("NavigateTo", "PutObject")
OPEN_WHILE_HOLDING = frozenset({"Drawer"})  # receptacles whose checkers add OpenObject(R, T)


class _Checklist:
    """The subtasks LLaMAR's checker would list for a checklist (module docstring): the
    independent ones per object, the conditional ones per (receptacle type, object type)."""

    def __init__(self, atoms: Sequence[dict[str, Any]]) -> None:
        self.independent: list[tuple[str, str]] = []  # (action, objectId)
        self.pairs: list[tuple[str, str]] = []  # (receptacle type, object type)
        self.subjects: list[str] = []
        for atom in atoms:
            subject, predicate, value = atom["subject"], atom["predicate"], atom["value"]
            if atom["at_least"] or "|" not in subject:
                raise ValueError(
                    f"atom {atom['key']}: LLaMAR's subtasks name object instances, so every "
                    "atom must name one object (an 'all' clause or an objectId)"
                )
            if predicate in ("inside", "on") and value:
                acts = ("NavigateTo", "PickupObject")
                pair = (type_of_id(atom["target"]), type_of_id(subject))
                if pair not in self.pairs:
                    self.pairs.append(pair)
            elif (predicate, value) == ("isOpen", False):
                acts = ("OpenObject", "CloseObject")
            elif (predicate, value) in STATE_ACTIONS:
                acts = ("NavigateTo", STATE_ACTIONS[(predicate, value)])
            else:
                raise ValueError(
                    f"atom {atom['key']}: {predicate}={value} has no LLaMAR subtask; expressible "
                    f"are inside/on, isOpen=false and {sorted(STATE_ACTIONS)}"
                )
            for act in acts:
                if (act, subject) not in self.independent:
                    self.independent.append((act, subject))
            if subject not in self.subjects:
                self.subjects.append(subject)
        self.receptacles = {r for r, _ in self.pairs}
        self.objects = {t for _, t in self.pairs}
        self.conditional_acts = CONDITIONAL_ACTS + (
            ("OpenObject",) if self.receptacles & OPEN_WHILE_HOLDING else ()
        )
        self.conditional = [
            f"{act}({r}, {t})"
            for r, t in self.pairs
            for act in CONDITIONAL_ACTS + (("OpenObject",) if r in OPEN_WHILE_HOLDING else ())
        ]


def _names(trace: dict[str, Any], subjects: Sequence[str]) -> dict[str, str]:
    """objectId -> ``<Type>_<k>``, numbered per type in the order the actions first name the
    objects, then the checklist's objects never named."""
    named = [
        rec["target"]
        for rec in trace["skills"]
        if rec["target"] and rec["reason"] != Failure.UNKNOWN_OBJECT
    ]
    counts: Counter = Counter()
    names: dict[str, str] = {}
    for object_id in [*named, *subjects]:
        if object_id not in names:
            kind = type_of_id(object_id)
            counts[kind] += 1
            names[object_id] = f"{kind}_{counts[kind]}"
    return names


def _index(agent: str) -> int:
    return int(agent.rsplit("_", 1)[1])


def _holders(trace: dict[str, Any]) -> dict[int, bool]:
    """Index of each successful ``lift`` record -> whether its agent ended up holding the
    object (the one lifter whose tick issued the pickup)."""
    out = {}
    for i, rec in enumerate(trace["skills"]):
        if is_joint(rec["skill"]) and rec["success"]:
            cell = trace["ticks"][rec["end"]][_index(rec["agent"])]
            out[i] = cell[0] == "PickupObject" and bool(cell[1])
    return out


def llamar_metrics(
    trace: dict[str, Any], type_counts: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """LLaMAR's SR, TR, C, B and L of one episode (formulas in the module docstring), with
    what they were computed from: ``subtasks`` and ``credited`` (LLaMAR-style strings),
    ``coverage_items`` and ``covered``, ``actions`` (successful actions per agent, the a_i of
    B) and ``names`` (objectId -> ``<Type>_<k>``).

    ``type_counts`` (object type -> instances in the room) gives the receptacle instances of
    the coverage items; by default the recorded scene's counts. Raises ValueError for a trace
    of another format or a checklist atom LLaMAR's subtasks cannot express."""
    if trace.get("format") != TRACE_FORMAT:
        raise ValueError(
            f"trace format {trace.get('format')!r} is not supported: LLaMAR's metrics read "
            f"format {TRACE_FORMAT}"
        )
    if not trace.get("checklist"):
        raise ValueError("the trace has no checklist atoms: LLaMAR's TR and C need subtasks")
    lists = _Checklist(trace["checklist"])
    names = _names(trace, lists.subjects)
    counts = (
        type_counts if type_counts is not None else object_type_counts(trace["config"]["scene"])
    )

    def render(act: str, object_id: str) -> str:
        return f"{act}({names.get(object_id, object_id)})"

    independent = [render(act, object_id) for act, object_id in lists.independent]
    subtasks = independent + lists.conditional
    credited: list[str] = []
    triples: set[tuple[str, str, str]] = set()

    def credit(act: str, object_id: str, held: str | None) -> None:
        action = render(act, object_id)
        if action in independent and action not in credited:
            credited.append(action)
        elif (
            act in lists.conditional_acts
            and type_of_id(object_id) in lists.receptacles
            and held is not None
            and type_of_id(held) in lists.objects
        ):
            triple = (act, type_of_id(object_id), type_of_id(held))
            if triple in triples:
                return
            triples.add(triple)
            credited.append(f"{act}({triple[1]}, {triple[2]})")
        else:
            return
        if act != "NavigateTo":
            credit("NavigateTo", object_id, held)

    lifted = _holders(trace)
    held: dict[str, str | None] = {}
    actions: Counter = Counter()
    issued = [
        render(llamar_action(rec["skill"]) or rec["skill"], rec["target"])
        for rec in trace["skills"]
        if rec["target"]
    ]
    finished = sorted(
        (i for i, rec in enumerate(trace["skills"]) if rec["end"] is not None),
        key=lambda i: (trace["skills"][i]["end"], _index(trace["skills"][i]["agent"])),
    )
    for i in finished:
        rec = trace["skills"][i]
        act = llamar_action(rec["skill"]) or rec["skill"]
        agent, target = rec["agent"], rec["target"]
        if not rec["success"]:
            continue
        if act not in NOT_COUNTED:
            actions[agent] += 1
        if act == "DropHandObject":
            held[agent] = None
        if not target or not lifted.get(i, True):  # the other lifter picked nothing up
            continue
        if act == "PickupObject":
            held[agent] = target
        credit(act, target, held.get(agent))
        if act == "PutObject":
            held[agent] = None

    items = [names[s] for s in lists.subjects]
    for receptacle in sorted(lists.receptacles):
        items += [f"{receptacle}_{k}" for k in range(1, counts.get(receptacle, 0) + 1)]
    items = list(dict.fromkeys(items))
    covered = [item for item in items if any(item in action for action in issued)]
    acting = [a for a in actions.values() if a > 0]
    return {
        "SR": float(len(credited) == len(subtasks)),
        "TR": len(credited) / len(subtasks),
        "C": len(covered) / len(items),
        "B": min(acting) / max(acting) if acting else None,
        "L": max(trace["final"]["decisions"].values(), default=0),
        "subtasks": subtasks,
        "credited": credited,
        "coverage_items": items,
        "covered": covered,
        "actions": dict(actions),
        "names": names,
    }


def comparison_rows(run_dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Ours and LLaMAR's metrics for every episode with a trace in the given run directories
    (``python -m benchmark.run ... output_dir=DIR``): one row per episode with ``baseline``,
    ``task``, ``scene``, ``n_agents`` and ``<metric>`` / ``<metric>_llamar`` for SR, TR, C, B,
    L. Raises ValueError naming the file for a directory without ``episodes.jsonl``, a line or
    trace that is not JSON, or a trace LLaMAR's metrics cannot read."""
    rows = []
    for run_dir in map(Path, run_dirs):
        episodes = run_dir / "episodes.jsonl"
        if not episodes.is_file():
            raise ValueError(f"{run_dir}: no episodes.jsonl (not an output_dir of benchmark.run)")
        for n, line in enumerate(episodes.read_text().splitlines(), start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{episodes}:{n}: not a JSON row: {err}") from err
            if not row.get("trace_path"):
                continue
            path = run_dir / row["trace_path"]
            try:
                trace = json.loads(path.read_text())
                ours, theirs = episode_metrics(trace), llamar_metrics(trace)
            except (OSError, ValueError, KeyError) as err:
                raise ValueError(f"{path}: {type(err).__name__}: {err}") from err
            out = {k: row.get(k) for k in ("baseline", "task", "scene", "n_agents")}
            for name in LLAMAR_METRICS:
                out[name], out[f"{name}_llamar"] = ours[name], theirs[name]
            rows.append(out)
    return rows


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}".rstrip("0").rstrip(".")


def main(argv: Sequence[str] | None = None) -> int:
    """Print the comparison of the episodes of run directories as a markdown table."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("run_dirs", nargs="+", help="output_dir of python -m benchmark.run")
    args = parser.parse_args(argv)
    try:
        rows = comparison_rows(args.run_dirs)  # all read before anything is printed
    except ValueError as err:
        parser.exit(2, f"error: {err}\n")
    head = ["team", "task", "scene", *(f"{m} ours / LLaMAR" for m in LLAMAR_METRICS)]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        cells = [f"{_cell(r[m])} / {_cell(r[m + '_llamar'])}" for m in LLAMAR_METRICS]
        print(f"| {r['baseline']} | {r['task']} | {r['scene']} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
