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

from benchmark.runner.jobs import Job, run_job

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


def run_inline(jobs: list[Job], retries: int) -> Iterator[dict[str, Any]]:
    for job in jobs:
        yield run_job(job, retries)


def run_on_ray(
    jobs: list[Job],
    workers: int,
    retries: int,
    address: str | None,
    tmpdir: Path,
    on_start: Callable[[], None] | None = None,
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
        task = ray.remote(num_cpus=1, max_retries=0)(run_job)
        pending = [task.remote(job, retries) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
    finally:
        if started_here:
            ray.shutdown()
