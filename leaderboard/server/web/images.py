"""The pictures of an entry's pages, drawn by the server and kept in a small in-process cache:
the metrics plot (PNG), and for any run episode of the entry a PNG per tick and a GIF of the
whole episode, drawn from the traces of the stored bundle the server verified; an uploaded
image is never shown.

Cache keys are the content a picture is drawn from (the bundle's sha256, the plotted numbers),
so a picture is never stale and never another board's. The cache is bounded in items and in
bytes, and pictures are drawn one at a time, so page views take at most one core however many
arrive: a tick's PNG replays its episode up to that tick and draws one frame; an episode's GIF
draws at most :data:`leaderboard.server.render.MAX_GIF_FRAMES` frames.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from leaderboard.core.archive import BundleError
from leaderboard.core.bundle import Bundle, read_bundle
from leaderboard.server import board
from leaderboard.server.render import metrics_plot, replay_gif, replay_png
from leaderboard.server.settings import Settings

PLOT_OTHERS = 7  # other entries of the track drawn beside the entry, best-ranked first
CACHE_ITEMS = 512
CACHE_BYTES = 96 * 2**20
log = logging.getLogger("leaderboard")
# Pictures are drawn one at a time: this bounds the CPU that page views can take.
_DRAWING = threading.Lock()


class LRU:
    """A thread-safe least-recently-used map of at most ``size`` items weighing at most
    ``max_bytes`` together (an item heavier than that is not kept)."""

    def __init__(self, size: int, max_bytes: int) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key][0]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def put(self, key: Any, value: Any, weight: int = 0) -> None:
        """Keep ``value`` under ``key``; ``weight``: its size in bytes (``len`` of bytes)."""
        if isinstance(value, bytes):
            weight = len(value)
        with self._lock:
            if key in self._items:
                self._bytes -= self._items.pop(key)[1]
            if weight > self.max_bytes:
                return
            self._items[key] = (value, weight)
            self._bytes += weight
            while len(self._items) > self.size or self._bytes > self.max_bytes:
                self._bytes -= self._items.popitem(last=False)[1][1]


CACHE = LRU(CACHE_ITEMS, CACHE_BYTES)


@dataclass(frozen=True)
class Episode:
    """A run episode of a bundle (what a replay's caption names); ``index``: its place among
    the bundle's run episodes, the number in its replay's URL."""

    index: int
    key: str
    task: str
    family: str
    scene: str
    seed: int


def _drawn(key: Any, draw: Callable[[], bytes]) -> bytes:
    """The cached picture ``key``, drawn (under the drawing lock) when missing."""
    picture = CACHE.get(key)
    if picture is None:
        with _DRAWING:
            picture = CACHE.get(key)  # drawn meanwhile by a request that held the lock
            if picture is None:
                picture = draw()
                CACHE.put(key, picture)
    return picture


def entry_plot(session: Session, entry_id: int) -> bytes | None:
    """The PNG of entry ``entry_id``'s SR, TR, C and B (means, 95% intervals) beside those of
    the PLOT_OTHERS best-ranked other entries of its track; None when there is no entry."""
    series = board.plot_series(session, entry_id, PLOT_OTHERS)
    if series is None:
        return None
    label, cells, others = series
    digest = hashlib.sha256(
        json.dumps([label, cells, others], sort_keys=True, default=str).encode()
    ).hexdigest()
    return _drawn(("plot", digest), lambda: metrics_plot(label, cells, others))


def _bundle(settings: Settings, bundle_path: str, sha256: str) -> Bundle | None:
    """The stored bundle, if it is there and is the one the server verified (same sha256)."""
    path = board.stored_bundle(settings.data_dir, bundle_path)
    if path is None:
        return None
    try:
        with path.open("rb") as stream:
            bundle = read_bundle(stream, settings.bundle_limits)
    except BundleError as err:
        # The file was checked when it was uploaded: it has been damaged since.
        log.error("stored bundle %s cannot be read: %s", path, err)
        return None
    if bundle.sha256 != sha256:
        log.error(
            "stored bundle %s has sha256 %s, not the verified %s", path, bundle.sha256, sha256
        )
        return None
    return bundle


def _runs(bundle: Bundle) -> list[dict[str, Any]]:
    return [r for r in bundle.rows if not r["reference"]]


def run_episodes(settings: Settings, bundle_path: str, sha256: str) -> list[Episode]:
    """Every run episode of the stored bundle, in the bundle's order (empty when the bundle
    is not on the server)."""
    key = ("episodes", sha256)
    episodes = CACHE.get(key)
    if episodes is None:
        bundle = _bundle(settings, bundle_path, sha256)
        if bundle is None:
            return []
        episodes = [
            Episode(n, r["key"], r["task"], r["family"], r["scene"], r["seed"])
            for n, r in enumerate(_runs(bundle))
        ]
        CACHE.put(key, episodes, weight=200 * len(episodes))
    return episodes


def episode_trace(settings: Settings, bundle_path: str, sha256: str, n: int) -> dict | None:
    """The verified trace of the stored bundle's ``n``-th run episode (0-based); None when
    there is no such episode or bundle."""
    if n < 0:
        return None
    key = ("trace", sha256, n)
    trace = CACHE.get(key)
    if trace is None:
        bundle = _bundle(settings, bundle_path, sha256)
        runs = [] if bundle is None else _runs(bundle)
        if n >= len(runs):
            return None
        trace = bundle.traces[runs[n]["key"]]
        CACHE.put(key, trace, weight=len(json.dumps(trace)))
    return trace


def _entry_trace(
    session: Session, settings: Settings, entry_id: int, n: int
) -> tuple[str, dict] | None:
    """The entry's bundle sha256 and the trace of its ``n``-th run episode, if both exist."""
    entry = board.get_entry(session, entry_id)
    if entry is None:
        return None
    submission = entry.submission
    trace = episode_trace(settings, submission.bundle_path, submission.bundle_sha256, n)
    return None if trace is None else (submission.bundle_sha256, trace)


def episode_gif(session: Session, settings: Settings, entry_id: int, n: int) -> bytes | None:
    """The replay GIF of the entry's ``n``-th run episode (0-based), drawn from its verified
    trace; None when there is no such entry, episode or bundle."""
    found = _entry_trace(session, settings, entry_id, n)
    if found is None:
        return None
    sha256, trace = found
    return _drawn(("gif", sha256, n), lambda: replay_gif(trace))


def episode_frame(
    session: Session, settings: Settings, entry_id: int, n: int, tick: int
) -> bytes | None:
    """The PNG of the entry's ``n``-th run episode after ``tick`` ticks, drawn from its
    verified trace; None when there is no such entry, episode, tick or bundle."""
    found = _entry_trace(session, settings, entry_id, n)
    if found is None or not 0 <= tick <= found[1]["final"]["ticks"]:
        return None
    sha256, trace = found
    return _drawn(("frame", sha256, n, tick), lambda: replay_png(trace, tick))
