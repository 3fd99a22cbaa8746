"""Episode checks in worker processes, each under a time and a memory limit.

:class:`EpisodePool` keeps up to ``size`` worker processes, started with the ``spawn`` method:
the server process runs threads, and a forked copy of a threaded process can inherit a lock
some other thread held. A worker sets its address-space limit (``RLIMIT_AS``) once at start,
then runs one check at a time under a wall-clock alarm (``SIGALRM``); a check past the time
limit, or out of memory, comes back as a rejected episode naming the limit. The parent keeps a
backstop for what the alarm cannot stop (code that never returns to the interpreter): a worker
that sends nothing for :func:`backstop_s`, or that dies, is killed and replaced, and its episode
rejected naming the limits. The other episodes keep their workers.

``pool.map`` takes the arguments of ``map``, so ``verify_bundle(bundle, mapper=pool.map)``
replays a bundle's episodes in the pool.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import resource
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

from leaderboard.core.verify import EpisodeCheck

MIB = 1 << 20
POLL_S = 0.5  # how often a waiting map looks whether the pool was closed
JOIN_S = 5.0  # how long to wait for a killed worker to be reaped


def backstop_s(time_s: float) -> float:
    """Seconds the parent waits for one episode's result before it kills the worker: a
    generous multiple of the worker's own limit ``time_s``, plus time for a fresh worker to
    import the verifier."""
    return 3 * time_s + 30.0


class PoolClosed(RuntimeError):
    """The pool was closed (the server is stopping) before the map finished."""


class CheckError(RuntimeError):
    """A check raised in its worker: a bug of the server, not a verdict on the episode.
    The message names the error and the episode; ``worker_traceback`` is the worker's."""

    def __init__(self, message: str, worker_traceback: str) -> None:
        super().__init__(message)
        self.worker_traceback = worker_traceback


class _EpisodeTimeout(BaseException):
    # Not an Exception: verify_episode turns any Exception of a replay into a rejection of the
    # trace, and the time limit must not read as a bad trace.
    pass


# --- in the worker process --------------------------------------------------------------------


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _EpisodeTimeout


def _limit_memory(memory_mb: int) -> None:
    limit = memory_mb * MIB
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _run(data: bytes, time_s: float) -> tuple[str, Any]:
    """One job, ``pickle((check, args))``: ``("ok", check(*args))``, ``("time", None)``,
    ``("memory", None)`` or ``("error", (line, traceback))``."""
    try:
        check, args = pickle.loads(data)
        # The inner finally cancels the alarm; an alarm that fires in it is still caught below.
        try:
            signal.setitimer(signal.ITIMER_REAL, time_s)
            return "ok", check(*args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _EpisodeTimeout:
        return "time", None
    except MemoryError:
        return "memory", None
    # Any other error is a bug of the check: the parent reports it, the worker goes on.
    except Exception as err:
        return "error", (f"{type(err).__name__}: {err}", traceback.format_exc())


def _serve(conn: Connection, time_s: float, memory_mb: int) -> None:
    """A worker process: run each job it is sent and send back the outcome; exit at EOF."""
    _limit_memory(memory_mb)
    signal.signal(signal.SIGALRM, _on_alarm)
    # Ctrl-C reaches the whole process group; the server stops its workers itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            data = conn.recv_bytes()
        except EOFError:
            return
        reply = _run(data, time_s)
        try:
            conn.send(reply)
        # Pickling the result failed before anything was written; say so instead.
        except Exception as err:
            conn.send(("error", (f"the result could not be sent: {err}", traceback.format_exc())))


# --- in the parent ----------------------------------------------------------------------------


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    job: int = -1  # the index of the job it runs, -1 when idle
    sent_at: float = 0.0


def _rejected(args: Sequence[Any], reason: str) -> EpisodeCheck:
    # The arguments are verify_bundle's: (ref, track, challenge, row, trace, seats).
    row, trace = args[3], args[4]
    return EpisodeCheck(str(row.get("key")), False, (reason,), {}, str(trace.get("trace_hash")))


class EpisodePool:
    """Up to ``size`` worker processes, each running one check at a time under ``time_s``
    seconds (wall clock) per check and ``memory_mb`` MiB of address space; ``backstop`` is the
    parent's own limit (seconds, default :func:`backstop_s`). One ``map`` at a time; ``close``
    may come from any thread."""

    def __init__(
        self, size: int, time_s: float, memory_mb: int, backstop: float | None = None
    ) -> None:
        if size < 1:
            raise ValueError(f"size: {size} must be >= 1")
        if not time_s > 0:
            raise ValueError(f"time_s: {time_s} must be > 0")
        if memory_mb < 1:
            raise ValueError(f"memory_mb: {memory_mb} must be >= 1")
        self.size = size
        self.time_s = time_s
        self.memory_mb = memory_mb
        self.backstop = backstop_s(time_s) if backstop is None else backstop
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._closed = False
        self._workers: list[_Worker] = []

    @property
    def pids(self) -> list[int | None]:
        """The process ids of the current workers."""
        with self._lock:
            return [w.process.pid for w in self._workers]

    def map(
        self, check: Callable[..., EpisodeCheck], *iterables: Iterable[Any]
    ) -> list[EpisodeCheck]:
        """``check`` of each tuple of arguments, in order, run in the workers. An episode over
        a limit, or whose worker died, is a rejected EpisodeCheck naming the limits. Raises
        CheckError when a check raised, PoolClosed when the pool was closed meanwhile."""
        jobs = list(zip(*iterables, strict=True))
        results: list[EpisodeCheck | None] = [None] * len(jobs)
        pending = deque(range(len(jobs)))
        busy: list[_Worker] = []
        try:
            while pending or busy:
                while pending and len(busy) < self.size:
                    worker = self._idle(busy)
                    index = pending.popleft()
                    worker.job, worker.sent_at = index, time.monotonic()
                    busy.append(worker)
                    data = pickle.dumps((check, jobs[index]))
                    # A worker that died cannot take it; the wait below sees its sentinel.
                    with contextlib.suppress(OSError):
                        worker.conn.send_bytes(data)
                self._collect(busy, jobs, results)
        except BaseException:
            # Jobs still running would answer the next map: stop their workers.
            for worker in busy:
                self._retire(worker)
            raise
        return [r for r in results if r is not None]

    def close(self) -> None:
        """Kill every worker; a running map raises PoolClosed. No worker starts afterwards."""
        with self._lock:
            self._closed = True
            workers = list(self._workers)
        for worker in workers:
            worker.process.kill()
        for worker in workers:
            worker.process.join(JOIN_S)

    def _idle(self, busy: list[_Worker]) -> _Worker:
        """A live idle worker, started if none is."""
        with self._lock:
            if self._closed:
                raise PoolClosed("the episode pool is closed")
            idle = [w for w in self._workers if w not in busy]
        for worker in idle:
            if worker.process.is_alive():
                return worker
            self._retire(worker)  # it died between jobs (killed from outside)
        return self._start()

    def _start(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise PoolClosed("the episode pool is closed")
            parent, child = self._ctx.Pipe()
            process = self._ctx.Process(
                target=_serve,
                args=(child, self.time_s, self.memory_mb),
                name="episode-worker",
                daemon=True,
            )
            process.start()
            child.close()
            worker = _Worker(process, parent)
            self._workers.append(worker)
            return worker

    def _retire(self, worker: _Worker) -> None:
        """Kill a worker and forget it."""
        worker.process.kill()
        worker.process.join(JOIN_S)
        worker.conn.close()
        with self._lock:
            if worker in self._workers:
                self._workers.remove(worker)

    def _check_open(self) -> None:
        with self._lock:
            if self._closed:
                raise PoolClosed("the episode pool was closed during verification")

    def _collect(
        self, busy: list[_Worker], jobs: list[tuple], results: list[EpisodeCheck | None]
    ) -> None:
        """Wait for the busy workers' next results (or deaths, or backstops) and take them."""
        first_due = min(w.sent_at for w in busy) + self.backstop
        timeout = max(0.0, min(POLL_S, first_due - time.monotonic()))
        ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout)
        # A close kills the workers: their deaths are no verdict on the episodes.
        self._check_open()
        for worker in list(busy):
            if worker.conn in ready:
                try:
                    reply = worker.conn.recv()
                except (EOFError, OSError):
                    reply = ("died", None)
            elif worker.process.sentinel in ready:
                reply = ("died", None)
            elif time.monotonic() - worker.sent_at > self.backstop:
                reply = ("backstop", None)
            else:
                continue
            busy.remove(worker)
            index, worker.job = worker.job, -1
            results[index] = self._outcome(worker, reply, jobs[index])

    def _outcome(self, worker: _Worker, reply: tuple[str, Any], args: tuple) -> EpisodeCheck:
        kind, value = reply
        if kind == "ok":
            return value
        if kind == "time":
            return _rejected(
                args, f"time: the replay passed the limit of {self.time_s:g} s (episode_time_s)"
            )
        if kind == "error":
            line, trace = value
            raise CheckError(f"{line} (episode {args[3].get('key')})", trace)
        # Every other outcome leaves the worker suspect: replace it.
        self._retire(worker)
        if kind == "memory":
            return _rejected(
                args,
                f"memory: the replay passed the limit of {self.memory_mb} MiB (episode_memory_mb)",
            )
        if kind == "backstop":
            return _rejected(
                args,
                f"time: no result within {self.backstop:g} s, past the limit of "
                f"{self.time_s:g} s (episode_time_s); its worker process was stopped",
            )
        code = worker.process.exitcode
        how = f"exit code {code}"
        if code is not None and -code in signal.valid_signals():
            how = f"signal {signal.Signals(-code).name}"
        return _rejected(
            args,
            f"worker: the process replaying it died ({how}) under the limits of "
            f"{self.time_s:g} s (episode_time_s) and {self.memory_mb} MiB (episode_memory_mb)",
        )
