"""``python -m leaderboard.bench``: the leaderboard under load, on loopback.

Starts a real server (``python -m leaderboard.serve`` in a subprocess, SQLite, ``workers``
verification processes), creates teams, and uploads ``submissions`` small bundles at once from
a bounded asynchronous client (at most ``concurrency`` requests in flight): the committed
reference bundles of the smoke suite and, one in four, a copy with one metric changed in one
row, which must be rejected. It waits for every verdict, then checks that none was lost or
duplicated (the database holds exactly the accepted submissions, each once, each final, each
with the verdict it should have; one entry per distinct set of traces), and prints one JSON
line: p50/p99 time to verdict (the server's accept-to-verdict times), replayed episodes/s
across the pool and per worker, and, beside them, single-process verification episodes/s of a
reference bundle and the env's scripted-oracle episodes/s (``benchmark.bench env``).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from sqlalchemy import func, select

from benchmark.bench import bench_env
from leaderboard import auth, crud
from leaderboard.bundle import MANIFEST, ROWS, read_bundle, seal
from leaderboard.db.models import Entry, Submission
from leaderboard.db.session import open_database
from leaderboard.seed import smoke_bundles
from leaderboard.settings import load_settings
from leaderboard.verify import measure

START_TIMEOUT_S = 120.0
POLL_S = 2.0  # each client polls its submission every 2 s, as a patient client would


def forged(data: bytes) -> bytes:
    """``data`` (a bundle) with the path length ``L`` of its first run row raised by one and
    every checksum made consistent again, as a forger would: only a replay can tell."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        contents = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    rows = [json.loads(line) for line in contents[ROWS].decode().splitlines()]
    next(r for r in rows if not r["reference"])["L"] += 1
    contents[ROWS] = "".join(json.dumps(r) + "\n" for r in rows).encode()
    manifest = json.loads(contents.pop(MANIFEST))
    return seal(manifest, contents)


def _start(data_dir: Path, port: int, workers: int, log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "leaderboard.serve",
            f"port={port}",
            f"data_dir={data_dir}",
            f"workers={workers}",
            "submissions_per_hour=100000",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}); see {log.name}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/openapi.json").status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the server did not start in {START_TIMEOUT_S} s")


async def _load(
    url: str, jobs: list[tuple[str, bytes, str]], concurrency: int, timeout: float
) -> tuple[list[int], list[str], float]:
    """Upload every job (token, bundle, expected state) with at most ``concurrency`` requests
    in flight, then poll until each is final; (accepted ids, refusals, wall seconds)."""
    gate = asyncio.Semaphore(concurrency)
    refusals: list[str] = []
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def upload(token: str, data: bytes) -> int | None:
            async with gate:
                response = await client.post(
                    "/api/submissions",
                    headers={"Authorization": f"Bearer {token}"},
                    files={"file": ("sub.tar.gz", data, "application/gzip")},
                )
            if response.status_code != 202:
                refusals.append(f"{response.status_code}: {response.text[:200]}")
                return None
            return response.json()["id"]

        async def final(submission: int) -> None:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                async with gate:
                    state = (await client.get(f"/api/submissions/{submission}")).json()
                if state["state"] in ("verified", "rejected"):
                    return
                await asyncio.sleep(POLL_S)
            raise TimeoutError(f"submission {submission} not final after {timeout} s")

        start = time.perf_counter()
        ids = await asyncio.gather(*(upload(token, data) for token, data, _ in jobs))
        accepted = [i for i in ids if i is not None]
        await asyncio.gather(*(final(i) for i in accepted))
        return list(ids), refusals, time.perf_counter() - start


def run_bench(
    submissions: int, concurrency: int, workers: int, teams: int, log_path: Path
) -> dict[str, Any]:
    bundles = [p.read_bytes() for p in smoke_bundles()]
    kinds = [(b, "verified") for b in bundles] + [(forged(bundles[0]), "rejected")]
    with tempfile.TemporaryDirectory(prefix="lb-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        settings = load_settings([f"data_dir={data_dir}"])
        sessions = open_database(settings.database_url)
        with sessions() as session:
            tokens = [
                auth.issue_token(session, crud.create_team(session, f"load-{i}").id)
                for i in range(teams)
            ]
        # One in four is forged; the genuine ones cycle through the reference bundles.
        jobs = []
        for i in range(submissions):
            data, want = kinds[-1] if i % 4 == 3 else kinds[(i - i // 4) % (len(kinds) - 1)]
            jobs.append((tokens[i % teams], data, want))
        port = _free_port()
        server = _start(data_dir, port, workers, log_path)
        try:
            ids, refusals, wall = asyncio.run(
                _load(f"http://127.0.0.1:{port}", jobs, concurrency, timeout=1800)
            )
        finally:
            server.terminate()
            server.wait(60)
        with sessions() as session:
            rows = {s.id: s for s in session.scalars(select(Submission))}
            entries = session.scalar(select(func.count(Entry.id)))
            episodes = {
                s.id: len(s.episodes) for s in rows.values() if s.state in ("verified", "rejected")
            }
        sessions.kw["bind"].dispose()
    accepted = [i for i in ids if i is not None]
    wrong = [
        f"submission {i}: {rows[i].state}, expected {want}"
        for i, (_, _, want) in zip(ids, jobs, strict=True)
        if i is not None and rows[i].state != want
    ]
    duplicated = sorted(i for i, n in Counter(accepted).items() if n > 1)
    times = [(s.updated_at - s.created_at).total_seconds() for s in rows.values()]
    first = min(s.created_at for s in rows.values())
    last = max(s.updated_at for s in rows.values())
    replayed = sum(episodes.values())
    span = (last - first).total_seconds()
    # Single-process verification of each reference bundle (its episodes differ in length:
    # the random team plays to the horizon), and the rate of the job mix it implies.
    names = [p.name.split("-")[0] for p in smoke_bundles()]
    single = {
        name: measure(read_bundle(io.BytesIO(data)), repeats=2)["episodes_per_s"]
        for name, data in zip(names, bundles, strict=True)
    }
    cost = {data: 1.0 / single[name] for name, data in zip(names, bundles, strict=True)}
    cost[kinds[-1][0]] = cost[bundles[0]]  # the forged copy replays as its original
    mix = replayed / sum(
        cost[data] * episodes[i] for i, (_, data, _) in zip(ids, jobs, strict=True) if i in episodes
    )
    oracle = bench_env(episodes=30, repeats=3)["oracle_episodes_per_s"]
    return {
        "bench": "leaderboard",
        "submissions": submissions,
        "accepted": len(accepted),
        "refused": refusals,
        "stored": len(rows),
        "lost": len(accepted) - len(set(accepted) & set(rows)),
        "duplicated": duplicated,
        "unexpected_verdicts": wrong,
        "entries": entries,
        "workers": workers,
        "concurrency": concurrency,
        "wall_s": round(wall, 1),
        "p50_time_to_verdict_s": round(float(np.percentile(times, 50)), 2),
        "p99_time_to_verdict_s": round(float(np.percentile(times, 99)), 2),
        "replayed_episodes": replayed,
        "replayed_episodes_per_s": round(replayed / span, 1),
        "replayed_episodes_per_s_per_worker": round(replayed / span / workers, 1),
        "single_process_verify_episodes_per_s": single,
        "single_process_mix_episodes_per_s": round(mix, 1),
        "pool_efficiency": round(replayed / span / (workers * mix), 2),
        "oracle_env_episodes_per_s": oracle,
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leaderboard.bench", description=__doc__)
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--workers", type=int, default=2, help="verification processes")
    parser.add_argument("--teams", type=int, default=20)
    parser.add_argument(
        "--log",
        type=Path,
        default=Path("outputs/leaderboard-bench-server.log"),
        help="where the server's log goes",
    )
    args = parser.parse_args(argv)
    result = run_bench(args.submissions, args.concurrency, args.workers, args.teams, args.log)
    print(json.dumps(result))
    ok = not (result["lost"] or result["duplicated"] or result["unexpected_verdicts"])
    return 0 if ok and result["stored"] == args.submissions else 1


if __name__ == "__main__":
    raise SystemExit(main())
