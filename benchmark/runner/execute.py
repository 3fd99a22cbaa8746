"""Run jobs inline or on Ray workers; results come back as each episode finishes.

``workers=0`` runs every job in this process (for debugging). Otherwise Ray starts inside the
job (``address=None``: a local instance with ``workers`` CPUs) or joins a cluster (``"auto"`` or
a URL), and each job is a Ray task. Every job is deterministic, so the rows and trace hashes do
not depend on the number of workers. Ray's temporary files go under ``tmpdir``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmark.runner.jobs import Job, run_jobs

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


def run_on_ray(
    jobs: list[Job],
    workers: int,
    retries: int,
    address: str | None,
    tmpdir: Path,
    on_start: Callable[[], None] | None = None,
    batch: int = 1,
) -> Iterator[dict[str, Any]]:
    import ray

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
        task = ray.remote(num_cpus=1, max_retries=0)(run_jobs)
        pending = [task.remote(group, retries) for group in chunks(jobs, batch)]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield from ray.get(done[0])
    finally:
        if started_here:
            ray.shutdown()
