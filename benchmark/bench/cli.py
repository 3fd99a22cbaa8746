"""The command line of ``python -m benchmark.bench <sim|env|run|llm>``: one JSON line of figures."""

from __future__ import annotations

import argparse
import json

from benchmark.bench.env import bench_env, bench_sim
from benchmark.bench.llm import bench_llm
from benchmark.bench.run import bench_run

BENCHES = {
    "sim": bench_sim,
    "env": bench_env,
    "run": bench_run,
    "llm": bench_llm,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the benchmark's components.")
    parser.add_argument("name", choices=sorted(BENCHES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--rss",
        action="store_true",
        help="llm: also the peak RSS of a worker playing one episode of each LLM baseline",
    )
    args = parser.parse_args(argv)
    options = {"rss": True} if args.rss else {}
    if options and args.name != "llm":
        parser.error("--rss is an option of the llm bench")
    print(json.dumps(BENCHES[args.name](repeats=args.repeats, **options)), flush=True)
    return 0
