"""The verification worker loop: queued submissions in, verdicts out.

:class:`VerificationPool` runs a dispatcher thread in the server process. Woken when a
submission is queued, and every ``poll_s`` seconds in any case, it verifies queued submissions
one after the other (:func:`leaderboard.server.services.verification.verify_next`) until the
queue is empty, replaying their episodes in an :class:`~leaderboard.core.episode_pool.EpisodePool`
(worker processes under the per-episode time and memory limits of the settings). A failure
outside a verification (the database is unreachable, say) is logged and the dispatcher tries
again later. :meth:`VerificationPool.stop` kills the workers at once; a submission being
verified stays ``verifying``, and ``crud.requeue_verifying`` at the next start queues it again.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy.orm import Session, sessionmaker

from leaderboard.core.episode_pool import EpisodePool, PoolClosed
from leaderboard.core.verify import verify_episode
from leaderboard.server.services.verification import Check, verify_next
from leaderboard.server.settings import Settings

log = logging.getLogger(__name__)
POLL_S = 5.0  # the dispatcher looks at the queue this often even when nobody wakes it
STOP_S = 10.0  # how long stop() waits for the dispatcher thread


class VerificationPool:
    """The server's verification: a dispatcher thread and an :class:`EpisodePool` of
    ``settings.workers`` processes (``episode_time_s`` and ``episode_memory_mb`` per episode).
    ``check`` replaces :func:`leaderboard.core.verify.verify_episode` (a module-level function: it
    is sent to the workers by name)."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        *,
        check: Check = verify_episode,
        poll_s: float = POLL_S,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.check = check
        self.poll_s = poll_s
        self.episodes = EpisodePool(
            settings.workers, settings.episode_time_s, settings.episode_memory_mb
        )
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the dispatcher (worker processes start with the first episode)."""
        if self._thread is not None:
            raise RuntimeError("the verification pool was already started")
        self._thread = threading.Thread(target=self._dispatch, name="verification", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the dispatcher thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def wake(self) -> None:
        """Tell the dispatcher that a submission was queued."""
        self._wake.set()

    def stop(self) -> None:
        """Kill the worker processes and end the dispatcher; returns within about STOP_S
        seconds. A submission being verified stays ``verifying``."""
        self._stopping.set()
        self._wake.set()
        self.episodes.close()
        if self._thread is not None:
            self._thread.join(STOP_S)
            if self._thread.is_alive():
                log.warning("the verification dispatcher did not end within %g s", STOP_S)

    def _next(self) -> int | None:
        return verify_next(self.settings, self.sessions, self.episodes.map, self.check)

    def _dispatch(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                while not self._stopping.is_set() and self._next() is not None:
                    pass
            except PoolClosed:
                return
            # verify_submission records the failures of a verification; what reaches here
            # (the database is unreachable, say) is logged and tried again later.
            except Exception:
                log.exception("verification dispatcher")
            self._wake.wait(self.poll_s)
