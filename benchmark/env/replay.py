"""Replaying a trace: re-execute its decisions in a fresh environment and compare the outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchmark.env.collab_env import CollabEnv, make_env
from benchmark.env.options import EnvOptions
from benchmark.env.trace import atom_record
from benchmark.tasks.spec import load_task_file


@dataclass(frozen=True)
class ReplayResult:
    """Outcome of a replay: whether the final checklist state and the hash match the trace's.

    ``checklist`` is the episode's checklist (atom records) as the environment grounds it;
    when it differs from the trace's, nothing was replayed (``satisfied`` is empty).
    """

    ok: bool
    checklist_matches: bool
    hash_matches: bool
    trace_hash: str
    replayed_hash: str
    satisfied: list[bool]
    checklist: list[dict[str, Any]] = field(default_factory=list)


def env_from_trace(trace: dict[str, Any]) -> CollabEnv:
    """A fresh environment reset to the traced episode's initial state.

    A task from outside the registry is rebuilt from the file the trace records, which must
    still hash to the recorded SHA-256 (else :class:`~benchmark.tasks.spec.TaskSpecError`).
    """
    return start_from_trace(trace)[0]


def start_from_trace(trace: dict[str, Any]) -> tuple[CollabEnv, dict[str, dict[str, Any]]]:
    """:func:`env_from_trace`, and the observations its reset gave every agent."""
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
    env = make_env(task, scene=cfg["scene"], n_agents=cfg["n_agents"], seed=cfg["seed"], **options)
    observations, _ = env.reset(seed=cfg["seed"])
    return env, observations


def replay(trace: dict[str, Any]) -> ReplayResult:
    """Re-execute a trace's decisions in a fresh environment and compare the outcome."""
    for key in ("config", "decisions", "final", "trace_hash", "checklist"):
        if key not in trace:
            raise ValueError(f"not a trace: missing key {key!r}")
    env = env_from_trace(trace)
    checklist = [atom_record(a) for a in env.episode.checklist]
    if checklist != trace["checklist"]:
        return ReplayResult(False, False, False, trace["trace_hash"], "", [], checklist)
    if "members" in trace:  # who played each agent: the team's record, not the env's
        env.record_members(trace["members"])
    for step in trace["decisions"]:
        if not env.agents:
            break
        env.step(step["actions"], observe=False)
    replayed = env.recorder.trace
    if "trace_hash" not in replayed:
        return ReplayResult(
            False, False, False, trace["trace_hash"], "", list(env.satisfied), checklist
        )
    same_list = replayed["final"]["satisfied"] == trace["final"]["satisfied"]
    same_hash = replayed["trace_hash"] == trace["trace_hash"]
    return ReplayResult(
        same_list and same_hash,
        same_list,
        same_hash,
        trace["trace_hash"],
        replayed["trace_hash"],
        replayed["final"]["satisfied"],
        checklist,
    )
