"""Peak resident memory of one episode, played in a fresh process as a runner worker plays it.

``episode_peak_rss(job)`` starts ``python -m benchmark.runner.peak_rss``, which plays the job with
the runner's own :func:`~benchmark.runner.jobs.run_jobs` (no retries) and reports its peak RSS (the
kernel's ``VmHWM``), so the figure covers that process alone: interpreter, imports, model and
episode. A list of jobs is played as a worker plays ``batch_episodes`` of them: all at once, their
LLM calls batched. (Not ``ru_maxrss``: Linux carries the parent's peak across fork and exec into
it.) A child that is killed cannot report: then the figure is the last ``VmHWM`` the parent read, at
most ``poll_s`` old. Like a Ray worker of the runner (one CPU each), the child runs with one OpenMP
thread unless ``OMP_NUM_THREADS`` is set. A watchdog kills the child above ``cap_mb``, so that a
runaway episode cannot take a shared machine's memory. Linux.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmark.runner.jobs import Job, run_jobs


def _memory_mb(pid: int | str, field: str) -> float | None:
    """``VmRSS`` (now) or ``VmHWM`` (peak so far) of process ``pid`` in MiB (None when it
    cannot be read: the process has ended)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024  # the kernel writes kB
    except (OSError, ValueError):
        return None
    return None


def episode_peak_rss(
    job: Job | Sequence[Job], cap_mb: float = 8192.0, poll_s: float = 0.2
) -> dict[str, Any]:
    """Play ``job`` (or the jobs, at once) in a fresh process; returns ``peak_rss_mb`` (MiB),
    ``wall_s`` (seconds of the whole process: start-up, imports and episodes), ``episode_s``
    (the longest episode's, when they ended), ``status`` (``ok``, ``error`` or ``killed``: the
    worst of them) and ``reason`` (why, unless ok)."""
    jobs = [job] if isinstance(job, Job) else list(job)
    if not jobs:
        raise ValueError("episode_peak_rss: no job to play")
    for k, item in enumerate(jobs):
        if not isinstance(item, Job):
            raise TypeError(f"episode_peak_rss: job {k} is a {type(item).__name__}, not a Job")
    env = {**os.environ}
    env.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="peak-rss") as tmp:
        job_path, out_path = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_path.write_text(json.dumps([asdict(j) for j in jobs]))
        start = time.perf_counter()
        # The child's output goes to stderr: a bench's stdout is its one line of figures.
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmark.runner.peak_rss", str(job_path), str(out_path)],
            env=env,
            stdout=2,
        )
        capped = reaped = False
        peak: float | None = None
        try:
            while not reaped:
                pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
                reaped = pid != 0
                if not reaped:
                    peak = _memory_mb(proc.pid, "VmHWM") or peak
                    rss = _memory_mb(proc.pid, "VmRSS")
                    if rss is not None and rss > cap_mb and not capped:
                        os.kill(proc.pid, signal.SIGKILL)
                        capped = True
                    time.sleep(poll_s)
        finally:
            if not reaped:  # interrupted: the child must not outlive the measurement
                proc.kill()
                proc.wait()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        result = json.loads(out_path.read_text()) if out_path.exists() else None
    rows = result["rows"] if result else None
    if result is not None:
        peak = result["peak_rss_mb"]
    out: dict[str, Any] = {
        "peak_rss_mb": None if peak is None else round(peak, 1),
        "wall_s": round(wall, 1),
        "episode_s": max(
            (r["wall_s"] for r in rows or [] if r.get("wall_s") is not None), default=None
        ),
    }
    if capped:
        return {**out, "status": "killed", "reason": f"RSS above the cap of {cap_mb:.0f} MiB"}
    if rows is None:
        code = proc.returncode
        why = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return {**out, "status": "killed", "reason": f"the process ended with no result: {why}"}
    for row in rows:
        if row["status"] != "ok":
            reason = row.get("error", "").splitlines()[0] if row.get("error") else ""
            return {**out, "status": row["status"], "reason": reason}
    return {**out, "status": "ok"}


def main(argv: list[str]) -> int:
    """Child side: play the jobs in ``argv[0]`` (a JSON list); write their rows and this
    process's peak RSS to ``argv[1]``."""
    jobs = [Job(**fields) for fields in json.loads(Path(argv[0]).read_text())]
    rows = [result["row"] for result in run_jobs(jobs, retries=0)]
    peak = _memory_mb("self", "VmHWM")
    Path(argv[1]).write_text(json.dumps({"rows": rows, "peak_rss_mb": peak}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
