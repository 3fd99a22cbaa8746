"""Episode traces: everything needed to replay an episode.

A trace is a JSON-serialisable dict: versions, the episode config, the checklist (one record per
atom: ``key``, ``predicate``, ``subject``, ``target``, ``value``, ``at_least``), every decision
(the agents' action texts at each decision point) and the skills they started (with the reason
of every failure), every message, a compact per-tick record (each agent's primitive action,
whether it succeeded, its running skill, whether another agent blocked it; a move held back by
the right-of-way rule counts as a failed Teleport), every change of an atom with the agent whose
action caused it, and the final outcome. Its ``trace_hash`` is the SHA-256 of its canonical JSON
without the hash itself. :func:`benchmark.env.replay.replay` re-executes the decisions and must
reproduce the checklist and the hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from typing import Any

from benchmark.env.messaging import Message
from benchmark.formats import TRACE_FORMAT
from benchmark.sim.scene_build import SCENE_FORMAT
from benchmark.tasks.episode import Episode
from benchmark.tasks.goals import Atom
from benchmark.tasks.spec import task_source
from benchmark.version import __version__


def atom_record(atom: Atom) -> dict[str, Any]:
    """A checklist atom as the trace holds it: its ``key`` and its fields."""
    return {
        "key": atom.key,
        "predicate": atom.predicate,
        "subject": atom.subject,
        "target": atom.target,
        "value": atom.value,
        "at_least": atom.at_least,
    }


def trace_hash(trace: dict[str, Any]) -> str:
    body = {k: v for k, v in trace.items() if k != "trace_hash"}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


class TraceRecorder:
    """Builds the trace of one episode as it runs."""

    def __init__(
        self,
        ep: Episode,
        options: dict[str, Any],
        instruction: str,
        satisfied: Sequence[bool],
    ) -> None:
        config: dict[str, Any] = {
            "task": ep.task.id,
            "scene": ep.scene,
            "n_agents": ep.n_agents,
            "seed": ep.seed,
            "options": dict(options),
        }
        source = task_source(ep.task)
        if source is not None:  # a task file outside the registry: its path and content hash
            config["task_file"] = source
        self.trace: dict[str, Any] = {
            "format": TRACE_FORMAT,
            "versions": {
                "benchmark": __version__,
                "task": ep.task.id,
                "scene_format": SCENE_FORMAT,
            },
            "config": config,
            "instruction": instruction,
            "checklist": [atom_record(a) for a in ep.checklist],
            "initially_satisfied": [bool(s) for s in satisfied],
            "decisions": [],
            "skills": [],
            "messages": [],
            "ticks": [],
            "atoms": [],
        }

    def members(self, members: dict[str, str]) -> None:
        """Record which member of a mixed team plays each agent (part of the hashed trace)."""
        self.trace["members"] = dict(members)

    def decisions(self, tick: int, actions: dict[str, str]) -> None:
        self.trace["decisions"].append({"tick": tick, "actions": dict(actions)})

    def skill(self, tick: int, agent: str, name: str, target: str | None, accepted: bool) -> dict:
        """Log a decision's skill; ``end``, ``success`` and ``reason`` (why it failed) are
        filled in when it finishes."""
        record = {
            "tick": tick,
            "agent": agent,
            "skill": name,
            "target": target,
            "accepted": accepted,
            "end": None,
            "success": None,
            "reason": None,
        }
        self.trace["skills"].append(record)
        return record

    def atom(self, tick: int, agent: str, index: int, satisfied: bool) -> None:
        self.trace["atoms"].append(
            {"tick": tick, "agent": agent, "atom": index, "satisfied": satisfied}
        )

    def tick(
        self,
        tick: int,
        primitives: list,
        results: list,
        skills: list,
        blocked: list,
        held_back: Collection[int] = (),
    ) -> None:
        """One row per tick: per agent [primitive, succeeded, running skill, blocked by others].

        A move the right-of-way rule held back (another agent stepped into the same cell this
        tick, :func:`benchmark.env.traffic.right_of_way`) is recorded as a failed Teleport."""
        row = []
        for k, (p, r, s, b) in enumerate(zip(primitives, results, skills, blocked, strict=True)):
            action = "Teleport" if k in held_back else p["action"] if p else None
            ok = False if k in held_back else None if r is None else bool(r.success)
            row.append([action, ok, None if s is None else s.name, bool(b)])
        self.trace["ticks"].append(row)

    def finish(
        self,
        messages: Sequence[Message],
        satisfied: Sequence[bool],
        ticks: int,
        decisions: dict[str, int],
        done: dict[str, bool],
    ) -> None:
        """Record the outcome (per agent: decisions taken, whether it chose ``done``) and seal
        the trace with its hash."""
        self.trace["messages"] = [m.to_json() for m in messages]
        self.trace["final"] = {
            "satisfied": [bool(s) for s in satisfied],
            "success": all(satisfied),
            "ticks": ticks,
            "decisions": dict(decisions),
            "done": dict(done),
        }
        self.trace["trace_hash"] = trace_hash(self.trace)
