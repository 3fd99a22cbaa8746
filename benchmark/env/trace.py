"""Episode traces: everything needed to replay an episode, and the replay itself.

A trace is a JSON-serialisable dict: versions, the episode config, the checklist, every
decision (the agents' action texts at each decision point) and the skills they started, every
message, a compact per-tick record (each agent's primitive action, whether it succeeded, its
running skill, whether another agent blocked it), every change of an atom with the agent whose
action caused it, and the final outcome. Its ``trace_hash`` is the SHA-256 of its canonical
JSON without the hash itself.
:func:`replay` re-executes the decisions and must reproduce the checklist and the hash.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from benchmark import __version__
from benchmark.sim.scene_build import SCENE_FORMAT
from benchmark.tasks import load_task_file, task_source

if TYPE_CHECKING:
    from benchmark.env.collab_env import CollabEnv

TRACE_FORMAT = 1


def trace_hash(trace: dict[str, Any]) -> str:
    body = {k: v for k, v in trace.items() if k != "trace_hash"}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


class TraceRecorder:
    """Builds the trace of one episode as it runs."""

    def __init__(self, env: CollabEnv) -> None:
        self.env = env
        ep = env.episode
        assert ep is not None
        config: dict[str, Any] = {
            "task": ep.task.id,
            "scene": ep.scene,
            "n_agents": ep.n_agents,
            "seed": ep.seed,
            "options": asdict(env.options),
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
            "instruction": env.instruction,
            "checklist": [a.key for a in ep.checklist],
            "initially_satisfied": [bool(s) for s in env.satisfied],
            "decisions": [],
            "skills": [],
            "messages": [],
            "ticks": [],
            "atoms": [],
        }

    def decisions(self, tick: int, actions: dict[str, str]) -> None:
        self.trace["decisions"].append({"tick": tick, "actions": dict(actions)})

    def skill(self, tick: int, agent: str, name: str, target: str | None, accepted: bool) -> dict:
        """Log a decision's skill; ``end`` and ``success`` are filled in when it finishes."""
        record = {
            "tick": tick,
            "agent": agent,
            "skill": name,
            "target": target,
            "accepted": accepted,
            "end": None,
            "success": None,
        }
        self.trace["skills"].append(record)
        return record

    def atom(self, tick: int, agent: str, index: int, satisfied: bool) -> None:
        self.trace["atoms"].append(
            {"tick": tick, "agent": agent, "atom": index, "satisfied": satisfied}
        )

    def tick(self, tick: int, primitives: list, results: list, skills: list, blocked: list) -> None:
        """One row per tick: per agent [primitive, succeeded, running skill, blocked by others]."""
        row = []
        for p, r, s, b in zip(primitives, results, skills, blocked, strict=True):
            action = p["action"] if p else None
            ok = None if r is None else bool(r.success)
            row.append([action, ok, None if s is None else s.name, bool(b)])
        self.trace["ticks"].append(row)

    def finish(self) -> None:
        env = self.env
        self.trace["messages"] = [m.to_json() for m in env.postbox.log]
        self.trace["final"] = {
            "satisfied": [bool(s) for s in env.satisfied],
            "success": all(env.satisfied),
            "ticks": env.tick,
            "decisions": {a: env.decisions[k] for k, a in enumerate(env.possible_agents)},
            "credit": {a: env.credit[k] for k, a in enumerate(env.possible_agents)},
            "done": {a: env.finished[k] for k, a in enumerate(env.possible_agents)},
        }
        self.trace["trace_hash"] = trace_hash(self.trace)


@dataclass(frozen=True)
class ReplayResult:
    """Outcome of a replay: whether the checklist and the hash match the trace's."""

    ok: bool
    checklist_matches: bool
    hash_matches: bool
    trace_hash: str
    replayed_hash: str
    satisfied: list[bool]


def env_from_trace(trace: dict[str, Any]) -> CollabEnv:
    """A fresh environment reset to the traced episode's initial state.

    A task from outside the registry is rebuilt from the file the trace records, which must
    still hash to the recorded SHA-256 (else :class:`~benchmark.tasks.TaskSpecError`).
    """
    from benchmark.env.collab_env import EnvOptions, make_env

    cfg = trace["config"]
    options = {k: v for k, v in cfg["options"].items() if k in EnvOptions.__dataclass_fields__}
    task: Any = cfg["task"]
    if "task_file" in cfg:
        source = cfg["task_file"]
        if not source.get("path"):
            raise ValueError(
                f"the trace's task {task!r} was not loaded from a file and cannot be rebuilt"
            )
        task = load_task_file(source["path"], sha256=source["sha256"])
        if task.id != cfg["task"]:
            raise ValueError(
                f"{source['path']} defines task {task.id!r}, the trace's task is {cfg['task']!r}"
            )
    return make_env(task, scene=cfg["scene"], n_agents=cfg["n_agents"], seed=cfg["seed"], **options)


def replay(trace: dict[str, Any]) -> ReplayResult:
    """Re-execute a trace's decisions in a fresh environment and compare the outcome."""
    for key in ("config", "decisions", "final", "trace_hash", "checklist"):
        if key not in trace:
            raise ValueError(f"not a trace: missing key {key!r}")
    env = env_from_trace(trace)
    if [a.key for a in env.episode.checklist] != trace["checklist"]:
        return ReplayResult(False, False, False, trace["trace_hash"], "", [])
    for step in trace["decisions"]:
        if not env.agents:
            break
        env.step(step["actions"])
    replayed = env.recorder.trace
    if "trace_hash" not in replayed:
        return ReplayResult(False, False, False, trace["trace_hash"], "", list(env.satisfied))
    same_list = replayed["final"]["satisfied"] == trace["final"]["satisfied"]
    same_hash = replayed["trace_hash"] == trace["trace_hash"]
    return ReplayResult(
        same_list and same_hash,
        same_list,
        same_hash,
        trace["trace_hash"],
        replayed["trace_hash"],
        replayed["final"]["satisfied"],
    )
