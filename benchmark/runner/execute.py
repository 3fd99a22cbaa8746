"""Run jobs inline or on Ray workers; results come back as each episode finishes.

``workers=0`` runs every job in this process (for debugging). Otherwise Ray starts inside the
job (``address=None``: a local instance with ``workers`` CPUs) or joins a cluster (``"auto"`` or
a URL), and each job is a Ray task. Every job is deterministic, so the rows and trace hashes do
not depend on the number of workers. Ray's temporary files go under ``tmpdir``.

A worker process can die in the middle of an episode (the OS or Ray's memory monitor kills it,
a native library crashes): its task returns nothing. Its episodes are submitted again, one per
task (a batch that died is split, so that one episode's death spares the others), each death
spending one of their ``retries``; when those are spent an episode becomes an error row naming
the reason, and the other episodes go on.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmark.runner.jobs import Job, error_result, run_jobs

# Ray puts Unix sockets under its temp dir; their paths must stay short.
MAX_RAY_TMPDIR = 40


def ray_tmpdir(preferred: Path) -> tuple[Path, bool]:
    """(directory for Ray's temporary files, whether it is inside ``preferred``).

    Ray's socket paths break past ~107 characters, so a long run directory falls back to a short
    directory under the system temp dir (recorded in the manifest and removed after the run).
    """
    preferred = preferred.resolve()
    if len(str(preferred)) <= MAX_RAY_TMPDIR:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred, True
    return Path(tempfile.mkdtemp(prefix="cbray")), False


def chunks(jobs: list[Job], size: int) -> list[list[Job]]:
    """``jobs`` in consecutive groups of ``size`` (the episodes a worker plays at once)."""
    if size < 1:
        raise ValueError(f"batch_episodes={size} must be at least 1")
    return [jobs[k : k + size] for k in range(0, len(jobs), size)]


def run_inline(jobs: list[Job], retries: int, batch: int = 1) -> Iterator[dict[str, Any]]:
    for group in chunks(jobs, batch):
        yield from run_jobs(group, retries)


def death_reason(err: Exception) -> str:
    """Why a Ray task returned nothing, in a line or two (``err`` is a ``ray.exceptions``
    error raised by ``ray.get``)."""
    import ray.exceptions as rex

    name = type(err).__name__
    if isinstance(err, rex.OutOfMemoryError):
        # Ray's first two lines say how full the node was and the threshold that was crossed.
        lines = [line.strip() for line in str(err).strip().splitlines()[:2]]
        return f"worker killed by Ray's memory monitor (out of memory): {' '.join(lines)}"
    if isinstance(err, rex.WorkerCrashedError):
        return (
            f"worker died: {name}: the worker process ended in the middle of the episode "
            "(killed by a signal such as SIGKILL, e.g. by the OS out-of-memory killer, or crashed)"
        )
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"worker failed: {name}: {first}"


# Called with (job, reason, whether the episode is played again) when a worker dies.
OnDeath = Callable[[Job, str, bool], None]


def run_on_ray(
    jobs: list[Job],
    workers: int,
    retries: int,
    address: str | None,
    tmpdir: Path,
    on_start: Callable[[], None] | None = None,
    batch: int = 1,
    on_death: OnDeath | None = None,
) -> Iterator[dict[str, Any]]:
    if not jobs:  # a finished run resumed: no cluster to start for nothing
        return
    import ray
    from ray.exceptions import RayError

    os.environ["RAY_TMPDIR"] = str(tmpdir)
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=workers, _temp_dir=str(tmpdir), **kwargs)
    if on_start is not None:
        on_start()
    try:
        # Ray retries nothing itself: the deaths are counted here, against the run's retries.
        task = ray.remote(num_cpus=1, max_retries=0)(run_jobs)
        pending: dict[Any, tuple[list[Job], int]] = {}  # task -> (its jobs, deaths so far)

        def submit(group: list[Job], died: int) -> None:
            pending[task.remote(group, retries - died, died)] = (group, died)

        for group in chunks(jobs, batch):
            submit(group, 0)
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            group, died = pending.pop(ref)
            try:
                results = ray.get(ref)
            except RayError as err:  # the worker died: these episodes only, never the run
                reason, again = death_reason(err), died < retries
                for job in group:
                    if on_death is not None:
                        on_death(job, reason, again)
                    if again:
                        submit([job], died + 1)
                results = [] if again else [error_result(j, retries + 1, reason) for j in group]
            yield from results
    finally:
        if started_here:
            ray.shutdown()
