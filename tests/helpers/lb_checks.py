"""Episode checks that misbehave, for the worker tests. They run in the worker processes, so
they are module-level functions (sent by name). A check "once" misbehaves on the first episode
any process gives it, marked by a file in the directory ``$LB_TEST_FLAGS`` that holds the
episode's key and the worker's pid; every other episode is verified as usual."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from leaderboard.core.verify import EpisodeCheck, verify_episode

FLAGS = "LB_TEST_FLAGS"


def flag(name: str) -> Path:
    return Path(os.environ[FLAGS]) / name


def read_flag(name: str, wait_s: float = 30.0) -> tuple[str, int]:
    """The key of the episode that misbehaved and the pid of its worker. The flag exists from
    the moment its worker claims it, a moment before it holds both lines: wait for them."""
    deadline = time.monotonic() + wait_s
    while len(lines := flag(name).read_text().splitlines()) < 2:
        if time.monotonic() > deadline:
            raise AssertionError(f"flag {name} still holds {lines} after {wait_s} s")
        time.sleep(0.01)
    key, pid = lines
    return key, int(pid)


def _first(name: str, row: dict[str, Any]) -> bool:
    """Whether this is the first episode to reach ``name`` (in any process)."""
    try:
        fd = os.open(flag(name), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, f"{row['key']}\n{os.getpid()}\n".encode())
    os.close(fd)
    return True


def dies_once(
    ref: Any, track: Any, challenge: Any, row: dict, trace: dict, seats: Any = None
) -> EpisodeCheck:
    if _first("dies", row):
        os._exit(3)
    return verify_episode(ref, track, challenge, row, trace, seats)


def exhausts_memory_once(
    ref: Any, track: Any, challenge: Any, row: dict, trace: dict, seats: Any = None
) -> EpisodeCheck:
    if _first("memory", row):
        bytearray(8 << 30)  # 8 GiB of address space, far past any limit the tests set
    return verify_episode(ref, track, challenge, row, trace, seats)


def sleeps_once(
    ref: Any, track: Any, challenge: Any, row: dict, trace: dict, seats: Any = None
) -> EpisodeCheck:
    if _first("sleeps", row):
        time.sleep(3600)
    return verify_episode(ref, track, challenge, row, trace, seats)


def hangs_once(
    ref: Any, track: Any, challenge: Any, row: dict, trace: dict, seats: Any = None
) -> EpisodeCheck:
    """Like code stuck outside the interpreter: the worker's alarm never gets through."""
    if _first("hangs", row):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)
    return verify_episode(ref, track, challenge, row, trace, seats)


def raises_once(
    ref: Any, track: Any, challenge: Any, row: dict, trace: dict, seats: Any = None
) -> EpisodeCheck:
    if _first("raises", row):
        raise RuntimeError("an injected bug")
    return verify_episode(ref, track, challenge, row, trace, seats)


def blocks(
    ref: Any, track: Any, challenge: Any, row: dict, trace: dict, seats: Any = None
) -> EpisodeCheck:
    """Never returns (within an hour); marks the first episode it got."""
    _first("blocks", row)
    time.sleep(3600)
    raise AssertionError("unreachable")
