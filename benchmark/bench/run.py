"""The runner's speed: ``python -m benchmark.bench run`` (oracle episodes/s inline and on Ray)."""

from __future__ import annotations

import platform
import time
from typing import Any


def bench_run(
    episodes: int = 60, repeats: int = 1, task: str = "transport_produce_fridge_v0"
) -> dict[str, Any]:
    """Oracle episodes/s through the runner's job path, inline and on 2 Ray workers (Ray start-up
    timed separately and excluded), and the scaling ratio."""
    import tempfile
    from pathlib import Path

    import ray

    from benchmark.runner.execute import ray_tmpdir, run_inline, run_on_ray
    from benchmark.runner.jobs import Job

    jobs = [
        Job(task, "test", 2, seed, True, "oracle", {}, {"observability": "full"})
        for seed in range(episodes)
    ]
    start = time.perf_counter()
    inline_rows = [r["row"] for r in run_inline(jobs, retries=0)]
    inline_rate = episodes / (time.perf_counter() - start)
    with tempfile.TemporaryDirectory(prefix="cbb") as tmp:
        tmpdir, _ = ray_tmpdir(Path(tmp))
        start = time.perf_counter()
        ray.init(
            num_cpus=2,
            _temp_dir=str(tmpdir),
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        # Warm both workers (imports, scene cache) before timing, as a long run would be.
        list(run_on_ray(jobs[:4], 2, 0, None, tmpdir))
        startup = time.perf_counter() - start
        best = 0.0
        for _ in range(repeats):
            start = time.perf_counter()
            ray_rows = [r["row"] for r in run_on_ray(jobs, 2, 0, None, tmpdir)]
            best = max(best, episodes / (time.perf_counter() - start))
        ray.shutdown()
    same = sorted(r["trace_hash"] for r in ray_rows) == sorted(r["trace_hash"] for r in inline_rows)
    return {
        "bench": "run",
        "task": task,
        "episodes": episodes,
        "inline_episodes_per_s": round(inline_rate, 1),
        "ray2_episodes_per_s": round(best, 1),
        "scaling_1_to_2": round(best / inline_rate, 2),
        "ray_startup_s": round(startup, 1),
        "same_trace_hashes": same,
        "python": platform.python_version(),
    }
