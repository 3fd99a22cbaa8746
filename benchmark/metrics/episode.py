"""Task and emergent-collaboration metrics, computed from episode traces.

Every metric's name, namespace, range and level is declared in :mod:`benchmark.metrics.specs`;
this module holds the formulas.

Per episode (:func:`episode_metrics`), with s_i the checklist atoms credited to agent i (atoms
satisfied at the end, credited to the agent whose action last made them true) and L the ticks:

* ``SR`` all atoms hold at the end; ``TR`` satisfied atoms / atoms;
* ``C`` target objects (the subjects of the checklist atoms; a type-level atom's type counts
  as one, matched by every object of the type) that some agent successfully acted on, over all
  target objects; failed actions do not count;
* ``B`` = min_i s_i / (max_i s_i + 1e-4), every agent counted;
* ``L`` ticks and ``L_decisions`` decisions (LLM calls for LLM agents);
* ``workload_entropy`` H(p) / log n and ``workload_gini`` of p_i = s_i / sum_j s_j (None when
  undefined: one agent, or nothing credited);
* ``redundancy`` the share of atoms attempted (an accepted object skill on a target object) by
  more than one agent; ``wasted_action_rate`` failed or no-progress (``wait``) decisions over
  all decisions;
* ``blocked_ticks`` ticks agents spent blocked by another agent (summed over agents: a
  navigating agent waiting for, or refused, a cell another agent holds or takes);
  ``collisions`` steps refused by a same-tick conflict over a cell (two agents stepping into
  it, or one stepping in before its occupant left); see :func:`interference`;
* ``messages``, ``message_tokens``, ``influence_rate`` the share of (message, recipient) pairs
  after which the recipient's next subtask differs from its previous one (pairs where the
  recipient decided both before and after; None without such pairs).

Across episodes: ``speedup`` L_1 / L_n against the single-agent reference of the same baseline
on the same task, scene, seed and comm setting (a successful one-agent episode; none without
one), ``parallel_efficiency`` speedup / n (1 for perfectly parallel work, below 1 once agents
get in each other's way or run out of work to share), ``EI`` 1 - L_n / L_1 (the fraction of
the one-agent time saved; negative when the team is slower) (:func:`add_reference_metrics`);
``specialisation`` the normalised mutual information between agent identity and subtask type
over a run's decisions (:func:`specialisation`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

from benchmark.formats import TRACE_FORMAT
from benchmark.metrics.specs import at_level
from benchmark.skills import object_skills, skill_of_primitive

METRIC_NAMES = tuple(m.name for m in at_level("episode"))
REFERENCE_METRIC_NAMES = tuple(m.name for m in at_level("reference"))
# The failure reason of an action refused because another agent stands in the way: the value of
# benchmark.sim.failures.Failure.BLOCKED, spelled out because the metrics read traces, never the
# simulator (an import-linter contract; a test checks the two agree).
BLOCKED_BY_AGENT = "blocked"


def _kind(skill: str) -> str:
    """The subtask type of a decision: primitive-level actions count as their skill."""
    return skill_of_primitive(skill)


def _checklist(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """The trace's checklist atoms (``key``, ``predicate``, ``subject``, ``target``, ``value``,
    ``at_least``), after checking that the trace has the format these metrics read."""
    if trace.get("format") != TRACE_FORMAT:
        raise ValueError(
            f"trace format {trace.get('format')!r} is not supported: the metrics read format "
            f"{TRACE_FORMAT} (checklist atoms as records)"
        )
    checklist = trace["checklist"]
    if not checklist:
        raise ValueError("the trace's checklist is empty: every task's goal grounds to atoms")
    if len(checklist) != len(trace["final"]["satisfied"]):
        raise ValueError(
            f"the trace's checklist has {len(checklist)} atoms but final.satisfied has "
            f"{len(trace['final']['satisfied'])} entries"
        )
    return checklist


def _is_target(atom: dict[str, Any], object_id: str | None) -> bool:
    """Whether ``object_id`` is a target object of ``atom``: its subject, or for a type-level
    atom (``at_least`` > 0) any object of the subject type, derived objects included
    (``Bread|...|BreadSliced_1`` is a ``Bread`` and a ``BreadSliced``)."""
    if object_id is None:
        return False
    subject = atom["subject"]
    if not atom["at_least"]:
        return object_id == subject
    return object_id.split("|")[0] == subject or f"|{subject}_" in object_id


def credited_atoms(trace: dict[str, Any]) -> dict[str, int]:
    """s_i: atoms satisfied at the end, credited to the agent whose action last made them true."""
    agents = trace_agents(trace)
    last: dict[int, str] = {}
    for event in trace["atoms"]:
        if event["satisfied"]:
            last[event["atom"]] = event["agent"]
        else:
            last.pop(event["atom"], None)
    s = dict.fromkeys(agents, 0)
    for atom, ok in enumerate(trace["final"]["satisfied"]):
        if ok and atom in last:
            s[last[atom]] += 1
    return s


def trace_agents(trace: dict[str, Any]) -> list[str]:
    """The names of the trace's agents, ``agent_0`` to ``agent_<n-1>``."""
    return [f"agent_{k}" for k in range(trace["config"]["n_agents"])]


def balance(s: Sequence[float]) -> float:
    """min_i s_i / (max_i s_i + 1e-4) over one share per agent (atoms, subtasks), every agent
    counted; raises ValueError without agents."""
    if not s:
        raise ValueError("balance needs one share per agent, got none")
    return min(s) / (max(s) + 1e-4)


def workload_entropy(s: Sequence[float]) -> float | None:
    total = sum(s)
    if len(s) < 2 or total <= 0:
        return None
    h = -sum(x / total * math.log(x / total) for x in s if x > 0)
    return h / math.log(len(s))


def gini(s: Sequence[float]) -> float | None:
    total = sum(s)
    if total <= 0:
        return None
    n = len(s)
    return sum(abs(a - b) for a in s for b in s) / (2 * n * total)


def influence_pairs(trace: dict[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """``(sender, recipient, influenced)`` for every delivered (message, recipient) pair whose
    recipient decided both before and after it: influenced when the recipient's next subtask
    (skill and target) differs from the one it chose before the message."""
    decisions: dict[str, list[tuple[int, tuple]]] = {a: [] for a in trace_agents(trace)}
    for rec in trace["skills"]:
        decisions[rec["agent"]].append((rec["tick"], (rec["skill"], rec["target"])))
    for msg in trace["messages"]:
        if not msg["delivered"]:
            continue
        for r in msg["recipients"]:
            before = [d for t, d in decisions[r] if t <= msg["tick"]]
            after = [d for t, d in decisions[r] if t > msg["tick"]]
            if before and after:
                yield msg["sender"], r, after[0] != before[-1]


def influence_rate(trace: dict[str, Any]) -> float | None:
    """Share of delivered (message, recipient) pairs after which the recipient's next subtask
    (skill and target) differs from the one it chose before the message."""
    pairs = [influenced for _, _, influenced in influence_pairs(trace)]
    return sum(pairs) / len(pairs) if pairs else None


def interference(trace: dict[str, Any]) -> tuple[int, int]:
    """``(blocked_ticks, collisions)`` of one episode, each summed over agents.

    At the skill action level, from the per-tick rows: a blocked tick is one flagged as blocked
    (the agent's ``navigate`` or ``explore`` waited for a cell another agent stood on, or its
    step was refused); a collision is a failed ``Teleport`` step, which only a same-tick
    conflict causes, since walking skills step only onto free reachable cells: the right-of-way
    rule held it back because a lower-index agent stepped into the same cell, or the simulator's
    order found the cell taken at its turn. At the primitive level, from the decisions: a move
    or teleport that failed because another agent stood in the cell counts as both.
    """
    if trace["config"].get("options", {}).get("action_level") == "primitive":
        bumps = sum(1 for rec in trace["skills"] if rec.get("reason") == BLOCKED_BY_AGENT)
        return bumps, bumps
    blocked = sum(1 for row in trace["ticks"] for cell in row if cell[3])
    collisions = sum(
        1 for row in trace["ticks"] for cell in row if cell[0] == "Teleport" and cell[1] is False
    )
    return blocked, collisions


def episode_metrics(trace: dict[str, Any]) -> dict[str, Any]:
    """Every per-episode metric of one trace, under its name in :mod:`benchmark.metrics.specs`."""
    final = trace["final"]
    satisfied = final["satisfied"]
    n_atoms = len(satisfied)
    agents = trace_agents(trace)
    s = credited_atoms(trace)
    shares = [s[a] for a in agents]
    checklist = _checklist(trace)
    # A type-level atom's subject type counts as one target object.
    targets = {atom["subject"] for atom in checklist}
    acted = set()
    attempts: dict[int, set[str]] = {i: set() for i in range(n_atoms)}
    failed = idle = 0
    acting = object_skills()
    for rec in trace["skills"]:
        kind = _kind(rec["skill"])
        if rec["success"] is False or not rec["accepted"]:
            failed += 1
        elif kind == "wait":
            idle += 1
        if kind not in acting or not rec["accepted"]:
            continue
        for i, atom in enumerate(checklist):
            if _is_target(atom, rec["target"]):
                attempts[i].add(rec["agent"])
                if rec["success"]:
                    acted.add(atom["subject"])
    decisions = len(trace["skills"])
    blocked, collisions = interference(trace)
    messages = trace["messages"]
    return {
        "SR": float(bool(final["success"])),
        "TR": sum(satisfied) / n_atoms,
        "C": len(acted) / len(targets),
        "B": balance(shares),
        "L": final["ticks"],
        "L_decisions": decisions,
        "workload_entropy": workload_entropy(shares),
        "workload_gini": gini(shares),
        "redundancy": sum(len(a) > 1 for a in attempts.values()) / n_atoms,
        "wasted_action_rate": (failed + idle) / decisions if decisions else 0.0,
        "blocked_ticks": blocked,
        "collisions": collisions,
        "messages": len(messages),
        "message_tokens": sum(m["tokens"] for m in messages),
        "influence_rate": influence_rate(trace),
        "credited": shares,
    }


def add_reference_metrics(row: dict[str, Any], reference_ticks: int | None) -> dict[str, Any]:
    """Add speedup, parallel efficiency and EI given L_1 of the single-agent reference run
    (all None without a reference); updates and returns ``row``."""
    n = row["n_agents"]
    if not reference_ticks or not row.get("L"):
        row.update(dict.fromkeys(REFERENCE_METRIC_NAMES))
        return row
    speedup = reference_ticks / row["L"]
    row.update(speedup=speedup, parallel_efficiency=speedup / n, EI=1 - row["L"] / reference_ticks)
    return row


def _entropy(counts: Collection[int]) -> float:
    """Shannon entropy (nats) of the distribution of positive counts, at least one."""
    total = sum(counts)
    return -sum(c / total * math.log(c / total) for c in counts)


def specialisation(traces: Iterable[dict[str, Any]]) -> float | None:
    """NMI between agent identity and subtask type over the object-skill decisions of a run:
    I(agent; type) / sqrt(H(agent) H(type)); None without decisions, 0 if either is constant."""
    joint: Counter = Counter()
    acting = object_skills()
    for trace in traces:
        for rec in trace["skills"]:
            kind = _kind(rec["skill"])
            if rec["accepted"] and kind in acting:
                joint[(rec["agent"], kind)] += 1
    if not joint:
        return None
    agents: Counter = Counter()
    kinds: Counter = Counter()
    for (a, k), c in joint.items():
        agents[a] += c
        kinds[k] += c
    ha, hk = _entropy(agents.values()), _entropy(kinds.values())
    if ha == 0 or hk == 0:
        return 0.0
    mutual = ha + hk - _entropy(joint.values())
    return mutual / math.sqrt(ha * hk)


def run_metrics(traces: Iterable[dict[str, Any]]) -> dict[str, float | None]:
    """Every run-level metric over the traces of a run's episodes."""
    return {"specialisation": specialisation(traces)}
