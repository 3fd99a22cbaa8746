"""Run a command and report the peak resident memory of its processes (a Ray run's workers too).

    python scripts/peak_rss.py [--limit-gb 8] -- python -m benchmark.run ...

Polls the command's process tree every 0.2 s and prints one JSON line: the peak RSS of the
largest single process (``peak_process_mb``: one Ray worker, or the command itself when it runs
inline), of the whole tree (``peak_tree_mb``), the exit code and the wall time. A tree that
passes ``--limit-gb`` is killed (``killed: true``), so a run that would take the machine down is
measured without doing so.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import psutil


def _tree(root: psutil.Process) -> list[psutil.Process]:
    try:
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def measure(command: list[str], limit_gb: float, interval: float = 0.2) -> dict[str, object]:
    """Run ``command`` to its end (or past ``limit_gb`` in all); its peak memory figures."""
    start = time.perf_counter()
    proc = subprocess.Popen(command)
    root = psutil.Process(proc.pid)
    peak_one = peak_all = 0
    killed = False
    while proc.poll() is None:
        sizes = []
        for p in _tree(root):
            try:
                sizes.append(p.memory_info().rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if sizes:
            peak_one, peak_all = max(peak_one, max(sizes)), max(peak_all, sum(sizes))
        if peak_all > limit_gb * 2**30:
            killed = True
            for p in reversed(_tree(root)):
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    continue
            break
        time.sleep(interval)
    rc = proc.wait()
    return {
        "peak_process_mb": round(peak_one / 2**20),
        "peak_tree_mb": round(peak_all / 2**20),
        "killed_over_limit": killed,
        "limit_gb": limit_gb,
        "returncode": rc,
        "wall_s": round(time.perf_counter() - start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-gb", type=float, default=8.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --")
    print(json.dumps({"command": " ".join(command), **measure(command, args.limit_gb)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
