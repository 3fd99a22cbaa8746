"""``python -m leaderboard.tools.bench [--attacks]``: the leaderboard under load, on loopback.

Starts a real server (``python -m leaderboard.server.serve`` in a subprocess, SQLite, ``workers``
verification processes) and uploads ``submissions`` small bundles at once from a bounded
asynchronous client (at most ``concurrency`` requests in flight): the committed reference
bundles of the smoke suite and, one in four, a copy with one metric changed in one row, which
must be rejected. No team sends one bundle twice (:func:`plan_jobs`; 50 teams for 200
uploads). It waits for every verdict, then checks that none was lost or
duplicated (the database holds exactly the accepted submissions, each once, each final, each
with the verdict it should have; one entry per distinct set of traces), and prints one JSON
line: p50/p99 time to verdict (the server's accept-to-verdict times), replayed episodes/s
across the pool and per worker, and, beside them, single-process verification episodes/s of a
reference bundle and the env's scripted-oracle episodes/s (``benchmark.bench env``).

``--attacks`` runs the same genuine load (with one verification worker unless ``--workers``
says otherwise) beside ``--attackers`` clients (4) that send every hostile upload of
:data:`leaderboard.tools.attacks.ATTACKS` in turn, round after round, from the start of the load
until its last verdict (each client finishes its round, so every attack is sent at least once
per client), each answered with its own status or counted as unexpected. Meanwhile one probe
per endpoint of :data:`PROBES` requests it every ``--probe-interval`` seconds (0.1) and records
its latency, and a thread samples the resident memory (RSS) of the server process and of the
server with its verification workers (its child processes) every 0.1 s. The JSON line adds the
attacks sent by name with the statuses they got, every unexpected outcome, the probes' latency
p50/p99/max per endpoint, and the peak RSS against the bound below. The run fails (exit 1) when
a submission is lost, duplicated or wrongly judged, an attack is not refused with its status, a
probe gets anything but 200, a probe's p99 exceeds :data:`TARGET_P99_S` (1 s), or the server's
peak RSS exceeds its bound.

The bound on the server process's RSS follows from the upload limits of the settings, since
every hostile upload is refused within them: at most ``UPLOAD_THREADS`` uploads (4,
:mod:`leaderboard.server.app`) are read at once, plus the one stored bundle the dispatcher reads for
the workers, and reading one holds at most the unpacked members (``max_unpacked_mb``), one
member decoded as text (``max_member_mb``) and the parsed JSON values (``max_json_values`` x
:data:`JSON_VALUE_BYTES`, 70); each upload in flight is also spooled in memory up to 1 MiB
before it goes to disk. So::

    bound = idle RSS + (UPLOAD_THREADS + 1) x (max_unpacked_mb + max_member_mb
            + max_json_values x 70 B) + uploads in flight x 1 MiB

which is 1,104 MiB above the idle server with the default limits (64 MiB, 16 MiB, 2 million)
and the bench's 32 + 4 uploads in flight. The idle RSS is measured after the server has
started and answered each probe once, before any upload. Each verification worker is held
to ``episode_memory_mb`` of address space by the worker pool; the total is reported, not bounded.
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
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
from sqlalchemy import func, select

from benchmark.bench.env import bench_env
from leaderboard.core.bundle import MANIFEST, ROWS, read_bundle, seal
from leaderboard.core.verify import measure
from leaderboard.server import auth, crud
from leaderboard.server.app import UPLOAD_THREADS
from leaderboard.server.db.models import Entry, Submission
from leaderboard.server.db.session import open_database
from leaderboard.server.settings import Settings, load_settings
from leaderboard.tools.attacks import ATTACKS, Builder
from leaderboard.tools.seed import smoke_bundles

START_TIMEOUT_S = 120.0
POLL_S = 2.0  # each client polls its submission every 2 s, as a patient client would
TARGET_P99_S = 1.0  # no probed request may take longer at p99 while the attacks run
# The endpoints probed while the attacks run; {id} is a genuine submission of the load.
PROBES = ("/api/tracks", "/", "/api/submissions/{id}", "/api/openapi.json")
RSS_INTERVAL_S = 0.1
JSON_VALUE_BYTES = 70  # a parsed JSON value at worst (leaderboard.core.archive.Limits)
SPOOL_BYTES = 1 << 20  # an upload is kept in memory up to 1 MiB, then on disk (starlette)
MIB = 1 << 20


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
            "leaderboard.server.serve",
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
    url: str,
    jobs: list[tuple[str, bytes, str]],
    concurrency: int,
    timeout: float,
    seen: list[int] | None = None,
) -> tuple[list[int], list[str], float]:
    """Upload every job (token, bundle, expected state) with at most ``concurrency`` requests
    in flight, then poll until each is final; (accepted ids, refusals, wall seconds). Each
    accepted id is also appended to ``seen`` as soon as it is known."""
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
            submission = response.json()["id"]
            if seen is not None:
                seen.append(submission)
            return submission

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


@dataclass
class _Siege:
    """What the attackers and the probes saw."""

    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    unexpected: list[str] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    probe_failures: list[str] = field(default_factory=list)


async def _probe(
    url: str, seen: list[int], interval_s: float, stop: threading.Event, siege: _Siege
) -> None:
    """Request each path of :data:`PROBES` every ``interval_s`` (one task per path) until
    ``stop`` is set, recording every latency in ``siege``; ``{id}`` takes the ids of ``seen``
    in turn once there are some."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def probe(path: str) -> None:
            loop = asyncio.get_running_loop()
            next_at = loop.time()
            while not stop.is_set():
                target = path
                if "{id}" in path:
                    if not seen:
                        await asyncio.sleep(interval_s)
                        continue
                    target = path.format(id=seen[len(siege.latencies[path]) % len(seen)])
                start = time.perf_counter()
                try:
                    response = await client.get(target)
                    status, detail = response.status_code, response.text[:200]
                except httpx.HTTPError as err:
                    status, detail = 0, f"{type(err).__name__}: {err}"
                siege.latencies[path].append(time.perf_counter() - start)
                if status != 200:
                    siege.probe_failures.append(f"GET {target}: {status}: {detail}")
                next_at = max(next_at + interval_s, loop.time())
                await asyncio.sleep(next_at - loop.time())

        await asyncio.gather(*(probe(path) for path in PROBES))


async def _attacked_load(
    url: str,
    jobs: list[tuple[str, bytes, str]],
    concurrency: int,
    timeout: float,
    attacks: list[tuple[str, bytes, int]],
    attacker_tokens: list[str],
    probe_interval_s: float,
) -> tuple[tuple[list[int], list[str], float], _Siege]:
    """:func:`_load` of ``jobs`` while one client per token of ``attacker_tokens`` sends the
    ``attacks`` (name, upload, expected status) round after round until the load is done, and
    :func:`_probe` times requests to other endpoints until the last attacker is done. The
    probes run in a thread of their own, with their own event loop and connections, so that
    the uploads' client work does not delay them."""
    siege = _Siege()
    seen: list[int] = []
    load_done = asyncio.Event()
    stop_probes = threading.Event()
    prober = threading.Thread(
        target=asyncio.run, args=(_probe(url, seen, probe_interval_s, stop_probes, siege),)
    )
    limits = httpx.Limits(max_connections=len(attacker_tokens))

    async def attacker(client: httpx.AsyncClient, index: int, token: str) -> None:
        # Each client starts at another attack, so different attacks meet in the server.
        first = index * len(attacks) // len(attacker_tokens)
        order = attacks[first:] + attacks[:first]
        while True:
            for name, data, want in order:
                try:
                    response = await client.post(
                        "/api/submissions",
                        headers={"Authorization": f"Bearer {token}"},
                        files={"file": ("sub.tar.gz", data, "application/gzip")},
                    )
                    status, detail = response.status_code, response.text[:200]
                except httpx.HTTPError as err:
                    status, detail = 0, f"{type(err).__name__}: {err}"
                siege.statuses[name][status] += 1
                if status != want:
                    siege.unexpected.append(f"{name}: {status}, expected {want}: {detail}")
            if load_done.is_set():
                return

    prober.start()
    try:
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
            attackers = asyncio.gather(
                *(attacker(client, i, t) for i, t in enumerate(attacker_tokens))
            )
            try:
                result = await _load(url, jobs, concurrency, timeout, seen)
            finally:
                load_done.set()
                await attackers
    finally:
        stop_probes.set()
        prober.join()
    return result, siege


class _RssSampler:
    """Samples the RSS of a process and of it with all its descendants every ``interval_s``
    in a thread, keeping the peaks (bytes)."""

    def __init__(self, pid: int, interval_s: float) -> None:
        self.process = psutil.Process(pid)
        self.interval_s = interval_s
        self.peak_server = self.peak_total = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> tuple[int, int]:
        """The RSS now: (the process, the process and its descendants), bytes."""
        server = self.process.memory_info().rss
        total = server
        for child in self.process.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.NoSuchProcess:
                continue  # a worker that ended between the listing and the reading
        self.peak_server = max(self.peak_server, server)
        self.peak_total = max(self.peak_total, total)
        self.samples += 1
        return server, total

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
            except psutil.NoSuchProcess:
                return  # the server has exited; the load reports why

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def server_rss_bound(settings: Settings, idle_bytes: int, in_flight: int) -> dict[str, float]:
    """The bound on the server process's RSS (see the module docstring) and its terms, MiB.

    Args:
        settings: the server's settings (its upload limits).
        idle_bytes: the idle server's RSS, bytes.
        in_flight: uploads the clients keep in flight at most.
    """
    per_read = (
        settings.max_unpacked_mb
        + settings.max_member_mb
        + settings.max_json_values * JSON_VALUE_BYTES / MIB
    )
    reads = (UPLOAD_THREADS + 1) * per_read
    spooled = in_flight * SPOOL_BYTES / MIB
    idle = idle_bytes / MIB
    return {
        "idle_server": round(idle, 1),
        "per_bundle_read": round(per_read, 1),
        "bundle_reads_at_once": UPLOAD_THREADS + 1,
        "spooled_uploads": round(spooled, 1),
        "bound": round(idle + reads + spooled, 1),
    }


def _warm(url: str) -> None:
    """One request to each probed endpoint that needs no submission (templates compiled,
    modules imported), so that the idle RSS and the first probes see a started server."""
    with httpx.Client(base_url=url, timeout=120) as client:
        for path in PROBES:
            if "{id}" not in path:
                client.get(path).raise_for_status()


def _latency(latencies: list[float]) -> dict[str, float | int]:
    if not latencies:
        return {"n": 0}
    return {
        "n": len(latencies),
        "p50_s": round(float(np.percentile(latencies, 50)), 3),
        "p99_s": round(float(np.percentile(latencies, 99)), 3),
        "max_s": round(max(latencies), 3),
    }


def run_bench(
    submissions: int,
    concurrency: int,
    workers: int,
    log_path: Path,
    attackers: int = 0,
    probe_interval_s: float = 0.1,
    attacks: Mapping[str, tuple[Builder, int]] = ATTACKS,
) -> dict[str, Any]:
    """The bench of the module docstring; returns the figures it prints as JSON.

    Args:
        submissions: genuine uploads (:func:`plan_jobs`).
        concurrency: the genuine client's requests in flight at most.
        workers: the server's verification processes.
        log_path: where the server's output goes.
        attackers: attacking clients; 0 runs the plain bench (no attacks, probes or RSS).
        probe_interval_s: seconds between two requests of one probed endpoint.
        attacks: name -> (builder, expected status), each built from the oracle's smoke
            bundle.
    """
    bundles = [p.read_bytes() for p in smoke_bundles()]
    kinds = [(b, "verified") for b in bundles] + [(forged(bundles[0]), "rejected")]
    hostile = (
        [(name, build(bundles[0]), want) for name, (build, want) in attacks.items()]
        if attackers
        else []
    )
    with tempfile.TemporaryDirectory(prefix="lb-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        settings = load_settings([f"data_dir={data_dir}"])
        sessions = open_database(settings.database_url)
        plan = plan_jobs(submissions)
        with sessions() as session:
            tokens = [
                auth.issue_token(session, crud.create_team(session, f"load-{i}").id)
                for i in range(1 + max(team for _, team in plan))
            ]
            attacker_tokens = [
                auth.issue_token(session, crud.create_team(session, f"attacker-{i}").id)
                for i in range(attackers)
            ]
        jobs = [(tokens[team], *kinds[kind]) for kind, team in plan]
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        server = _start(data_dir, port, workers, log_path)
        try:
            if attackers:
                _warm(url)
                sampler = _RssSampler(server.pid, RSS_INTERVAL_S)
                idle, _ = sampler.sample()
                with sampler:
                    (ids, refusals, wall), siege = asyncio.run(
                        _attacked_load(
                            url,
                            jobs,
                            concurrency,
                            1800,
                            hostile,
                            attacker_tokens,
                            probe_interval_s,
                        )
                    )
            else:
                ids, refusals, wall = asyncio.run(_load(url, jobs, concurrency, timeout=1800))
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
    result = {
        "bench": "leaderboard",
        "submissions": submissions,
        "accepted": len(accepted),
        "refused": refusals,
        "stored": len(rows),
        "lost": len(accepted) - len(set(accepted) & set(rows)),
        "duplicated": duplicated,
        "unexpected_verdicts": wrong,
        "entries": entries,
        "teams": len(tokens),
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
    if attackers:
        rss = server_rss_bound(settings, idle, concurrency + attackers)
        rss["peak_server"] = round(sampler.peak_server / MIB, 1)
        rss["peak_server_and_workers"] = round(sampler.peak_total / MIB, 1)
        rss["samples"] = sampler.samples
        result["attacks"] = {
            "attackers": attackers,
            "sent": sum(sum(c.values()) for c in siege.statuses.values()),
            "by_name": {
                name: {"expected": want, "statuses": dict(sorted(siege.statuses[name].items()))}
                for name, _, want in hostile
            },
            "unexpected": len(siege.unexpected),
            "unexpected_first": siege.unexpected[:10],
        }
        result["probes"] = {
            "interval_s": probe_interval_s,
            "target_p99_s": TARGET_P99_S,
            "latency": {path: _latency(siege.latencies[path]) for path in PROBES},
            "failures": len(siege.probe_failures),
            "failures_first": siege.probe_failures[:10],
        }
        result["rss_mib"] = rss
    return result


def failures(result: dict[str, Any]) -> list[str]:
    """Why a bench result fails (empty when it passes): see the module docstring."""
    out = []
    if result["lost"] or result["duplicated"] or result["unexpected_verdicts"]:
        out.append("a submission was lost, duplicated or wrongly judged")
    if result["stored"] != result["submissions"]:
        out.append(f"{result['stored']} submissions stored of {result['submissions']} sent")
    if "attacks" in result:
        attacks, probes, rss = result["attacks"], result["probes"], result["rss_mib"]
        if attacks["unexpected"]:
            out.append(f"{attacks['unexpected']} attack(s) not refused with their status")
        unsent = [name for name, seen in attacks["by_name"].items() if not seen["statuses"]]
        if unsent:
            out.append(f"attacks never sent: {unsent}")
        if probes["failures"]:
            out.append(f"{probes['failures']} probe(s) answered with another status than 200")
        for path, latency in probes["latency"].items():
            if not latency["n"]:
                out.append(f"GET {path} was never probed")
            elif latency["p99_s"] > TARGET_P99_S:
                out.append(f"GET {path}: p99 {latency['p99_s']} s > {TARGET_P99_S} s")
        if rss["peak_server"] > rss["bound"]:
            out.append(f"server RSS peaked at {rss['peak_server']} MiB > {rss['bound']} MiB")
    return out


def plan_jobs(submissions: int) -> list[tuple[int, int]]:
    """The uploads of the load, in order, as (kind, team): kinds 0-3 are the four reference
    bundles in turn and kind 4, one upload in four, the forged copy. The j-th upload of a kind
    comes from team j: a team's byte-identical resubmission is answered with its first
    submission and stores nothing, so no team sends one bundle twice."""
    sent: Counter[int] = Counter()
    out = []
    for i in range(submissions):
        kind = 4 if i % 4 == 3 else (i - i // 4) % 4
        out.append((kind, sent[kind]))
        sent[kind] += 1
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m leaderboard.tools.bench", description=__doc__)
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument(
        "--workers", type=int, help="verification processes (default 2; 1 with --attacks)"
    )
    parser.add_argument(
        "--attacks", action="store_true", help="send the hostile uploads beside the load"
    )
    parser.add_argument("--attackers", type=int, default=4, help="attacking clients")
    parser.add_argument(
        "--probe-interval", type=float, default=0.1, help="seconds between probes of one endpoint"
    )
    parser.add_argument(
        "--log",
        type=Path,
        default=Path("outputs/leaderboard-bench-server.log"),
        help="where the server's log goes",
    )
    args = parser.parse_args(argv)
    workers = args.workers or (1 if args.attacks else 2)
    result = run_bench(
        args.submissions,
        args.concurrency,
        workers,
        args.log,
        attackers=args.attackers if args.attacks else 0,
        probe_interval_s=args.probe_interval,
    )
    print(json.dumps(result))
    problems = failures(result)
    for problem in problems:
        print(f"python -m leaderboard.tools.bench: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
