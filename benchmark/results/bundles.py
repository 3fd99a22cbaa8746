"""Reading the benchmark's own committed bundles (``leaderboard/data/paper/*.tar.gz``): gzip'd
tars of a run directory's ``episodes.jsonl``, ``traces/`` and ``manifest.json``, as the
leaderboard packs them, read without unpacking to disk. These bundles are trusted (they are the
repository's own); the leaderboard reads uploaded ones with its own bounded reader
(``leaderboard.core.bundle``), which refuses what this one would accept.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any


class BundleError(ValueError):
    """A committed bundle that cannot be read; the message names the file."""


def bundle_members(path: Path) -> dict[str, bytes]:
    """A committed bundle's files (name -> bytes); BundleError naming the file when it is
    unreadable or holds no ``episodes.jsonl``."""
    try:
        with tarfile.open(path, "r:gz") as tar:
            members = {
                m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers()
                if m.isfile()
            }
    except (OSError, tarfile.TarError, EOFError) as err:
        raise BundleError(f"cannot read bundle {path}: {err}") from err
    if "episodes.jsonl" not in members:
        raise BundleError(f"bundle {path} has no episodes.jsonl")
    return members


def bundle_rows(members: dict[str, bytes]) -> list[dict[str, Any]]:
    """The episode rows of a bundle's files (:func:`bundle_members`), in order."""
    return [json.loads(line) for line in members["episodes.jsonl"].decode().splitlines()]
