"""Episode jobs: what one worker runs, and the result row it produces.

A job never raises: an episode that raises is retried ``retries`` times, then returned as an
error row carrying the message, so nothing is ever silently dropped. (A worker process that dies
cannot return anything: :mod:`benchmark.runner.execute` retries and records those.)

Every team a job builds is bound to the worker's LLM resources (:meth:`benchmark.agents.Team.bind`):
the process's :data:`WORKER_LLMS`, so a worker loads each model once for all the jobs it runs,
and in a batch of jobs each episode's batch seat.
"""

from __future__ import annotations

import functools
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.llm.batching import BatchSeat, run_batched
from benchmark.llm.resources import LLMPool, LLMResources
from benchmark.metrics.episode import episode_metrics
from benchmark.results.suite import EpisodeRef
from benchmark.rollout import run_episode
from benchmark.tasks.decompose import quality
from benchmark.tasks.spec import TaskSpec, load_task, load_task_file

WORKER_LLMS = LLMPool()  # this process's backends, lent to the team of every job it runs


@dataclass(frozen=True)
class Job:
    """One episode to run (everything a result depends on).

    ``task`` is the task id; a task from a file outside the registry also has that file's
    absolute path and content hash, which the episode checks before it runs.
    """

    task: str
    split: str
    n_agents: int
    seed: int
    comm: bool
    baseline: str
    team_kwargs: dict[str, Any] = field(default_factory=dict)
    env_options: dict[str, Any] = field(default_factory=dict)
    reference: bool = False
    task_file: str = ""
    task_sha256: str = ""
    scene: str | None = None  # set by a challenge; otherwise the seed chooses it in the split
    team: str = ""  # the team to build when it is not ``baseline`` (cross-play: ``mixed``)
    partner: str = ""  # cross-play: the partner population member playing the other agents

    @property
    def key(self) -> str:
        """Unique, readable id of the episode within a run (:meth:`EpisodeRef.key`)."""
        return EpisodeRef(
            self.task, self.split, self.seed, self.n_agents, self.comm, self.scene, self.reference
        ).key(self.baseline)


def _source(job: Job) -> dict[str, str]:
    """The task file's path and content hash, for a task outside the registry."""
    return {"task_file": job.task_file, "task_sha256": job.task_sha256} if job.task_file else {}


def _episode(job: Job, seat: BatchSeat | None) -> tuple[dict[str, Any], dict[str, Any]]:
    task = (
        load_task_file(job.task_file, sha256=job.task_sha256)
        if job.task_file
        else load_task(job.task)
    )
    options = {**job.env_options, "comm": job.comm, "split": job.split}
    if job.reference:
        options["strict_agents"] = False
    env = make_env(task, scene=job.scene, n_agents=job.n_agents, seed=job.seed, **options)
    lent = LLMResources(llms=WORKER_LLMS, batch=seat)
    team = make_team(job.team or job.baseline, resources=lent, **job.team_kwargs)
    try:
        trace = run_episode(env, team, seed=job.seed)
        extra = dict(team.metrics())
        plan = team.plan()
    finally:
        team.close()
    if plan is not None:
        scores = quality(plan, env.episode.checklist, env.possible_agents)
        extra.update({f"plan/{k}": v for k, v in scores.items()})
    row = {
        **extra,
        "task": job.task,
        **_group(task),
        "task_version": task.version,
        "scene": trace["config"]["scene"],
        **episode_metrics(trace),
        "trace_hash": trace["trace_hash"],
        **({"members": trace["members"]} if "members" in trace else {}),
    }
    return row, trace


def run_jobs(jobs: list[Job], retries: int = 1, attempts_before: int = 0) -> list[dict[str, Any]]:
    """Run ``jobs`` at once (:func:`benchmark.llm.batching.run_batched`: every decision round's
    LLM calls of all of them in one batch); their results, in order. One job alone runs as
    :func:`run_job`."""
    if len(jobs) == 1:
        return [run_job(jobs[0], retries, attempts_before)]
    results, _ = run_batched(
        [functools.partial(run_job, job, retries, attempts_before) for job in jobs]
    )
    for result in results:
        # run_job records every Exception in its row; anything else (an interrupt) propagates.
        if isinstance(result, BaseException):
            raise result
    return results


def _base(job: Job) -> dict[str, Any]:
    """The fields of every row of ``job``, whatever its outcome."""
    return {
        "key": job.key,
        "split": job.split,
        "seed": job.seed,
        "n_agents": job.n_agents,
        "baseline": job.baseline,
        "comm": job.comm,
        "reference": job.reference,
        **_source(job),
        **({"partner": job.partner} if job.partner else {}),
    }


def _group(task: TaskSpec) -> dict[str, Any]:
    """The row's summary groups: the task's family, and the ambiguity level its source suite
    gives it (MAP-THOR's 1-4) when it has one."""
    level = task.source.level if task.source is not None else None
    return {"family": task.family, **({"level": level} if level is not None else {})}


def _family(job: Job) -> dict[str, Any]:
    """The task's family (and level), so that an error row counts in its groups' summaries
    (nothing when the task itself cannot be loaded: the error row says why)."""
    try:
        task = (
            load_task_file(job.task_file, sha256=job.task_sha256)
            if job.task_file
            else load_task(job.task)
        )
    except ValueError:
        return {}
    return _group(task)


def error_result(job: Job, attempts: int, error: str) -> dict[str, Any]:
    """The result of an episode that failed ``attempts`` times, the last with ``error``."""
    row = {
        **_base(job),
        "task": job.task,
        **_family(job),
        "status": "error",
        "attempts": attempts,
        "error": error.strip(),
    }
    return {"job": asdict(job), "row": row, "trace": None}


def run_job(
    job: Job, retries: int = 1, attempts_before: int = 0, seat: BatchSeat | None = None
) -> dict[str, Any]:
    """Run ``job``; returns ``{"job": ..., "row": ..., "trace": ... or None}``.

    ``attempts_before`` counts attempts already spent elsewhere (a worker that died playing the
    episode): the row's ``attempts`` includes them, and ``retries`` is what is left. ``seat``:
    the episode's place in a batch of jobs played at once (:func:`run_jobs`).
    """
    errors = []
    for attempt in range(retries + 1):
        start = time.perf_counter()
        try:
            row, trace = _episode(job, seat)
        except Exception as err:  # any failure of one episode is recorded, never fatal
            errors.append(f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=4)}")
            continue
        # Wall time is a resource figure of the row (reported, e.g. on the leaderboard); it is
        # not part of the trace and affects no result.
        wall = round(time.perf_counter() - start, 3)
        attempts = attempts_before + attempt + 1
        return {
            "job": asdict(job),
            "row": {**_base(job), **row, "status": "ok", "attempts": attempts, "wall_s": wall},
            "trace": trace,
        }
    return error_result(job, attempts_before + retries + 1, errors[-1])
