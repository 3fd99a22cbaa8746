"""The pictures of an entry's page, drawn by the server and kept in a small in-process cache:
the metrics plot (PNG) and replays of its first run episodes (GIF), drawn from the traces of
the stored bundle the server verified; an uploaded image is never shown.

Cache keys are the content a picture is drawn from (the bundle's sha256, the plotted numbers),
so a picture is never stale and never another board's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from leaderboard import board
from leaderboard.archive import BundleError
from leaderboard.bundle import Bundle, read_bundle
from leaderboard.render import metrics_plot, replay_gif
from leaderboard.settings import Settings

PLOT_OTHERS = 7  # other entries of the track drawn beside the entry, best-ranked first
GIF_EPISODES = 3  # run episodes of an entry shown as replays
CACHE_ITEMS = 64
log = logging.getLogger("leaderboard")
# pyplot keeps global state, so pictures are drawn one at a time; this also bounds the CPU
# that page views can take.
_DRAWING = threading.Lock()


class LRU:
    """A thread-safe least-recently-used map of at most ``size`` items."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


CACHE = LRU(CACHE_ITEMS)


@dataclass(frozen=True)
class Episode:
    """A run episode of a bundle (what a replay's caption names)."""

    key: str
    task: str
    scene: str
    seed: int


def _legend_text(label: str) -> str:
    # matplotlib reads $...$ as mathematics (a malformed formula raises); show it as typed.
    return label.replace("$", r"\$")


def entry_plot(session: Session, entry_id: int) -> bytes | None:
    """The PNG of entry ``entry_id``'s SR, TR, C and B (means, 95% intervals) beside those of
    the PLOT_OTHERS best-ranked other entries of its track; None when there is no entry."""
    series = board.plot_series(session, entry_id, PLOT_OTHERS)
    if series is None:
        return None
    label, cells, others = series
    label = _legend_text(label)
    others = {_legend_text(k): v for k, v in others.items()}
    digest = hashlib.sha256(
        json.dumps([label, cells, others], sort_keys=True, default=str).encode()
    ).hexdigest()
    key = ("plot", digest)
    png = CACHE.get(key)
    if png is None:
        with _DRAWING:
            png = metrics_plot(label, cells, others)
        CACHE.put(key, png)
    return png


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


def run_episodes(settings: Settings, view: board.EntryView) -> list[Episode]:
    """The first GIF_EPISODES run episodes of the entry's bundle, in the bundle's order
    (empty when the bundle is not on the server)."""
    key = ("episodes", view.bundle_sha256)
    episodes = CACHE.get(key)
    if episodes is None:
        bundle = _bundle(settings, view.bundle_path, view.bundle_sha256)
        if bundle is None:
            return []
        runs = [r for r in bundle.rows if not r["reference"]][:GIF_EPISODES]
        episodes = [Episode(r["key"], r["task"], r["scene"], r["seed"]) for r in runs]
        CACHE.put(key, episodes)
    return episodes


def episode_gif(session: Session, settings: Settings, entry_id: int, n: int) -> bytes | None:
    """The replay GIF of the entry's ``n``-th run episode (0-based, below GIF_EPISODES),
    drawn from its verified trace; None when there is no such entry, episode or bundle."""
    if not 0 <= n < GIF_EPISODES:
        return None
    entry = board.get_entry(session, entry_id)
    if entry is None:
        return None
    submission = entry.submission
    key = ("gif", submission.bundle_sha256, n)
    gif = CACHE.get(key)
    if gif is None:
        bundle = _bundle(settings, submission.bundle_path, submission.bundle_sha256)
        if bundle is None:
            return None
        runs = [r for r in bundle.rows if not r["reference"]]
        if n >= len(runs):
            return None
        with _DRAWING:
            gif = replay_gif(bundle.traces[runs[n]["key"]])
        CACHE.put(key, gif)
    return gif
