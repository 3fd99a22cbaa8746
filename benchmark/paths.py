"""Where the benchmark keeps its committed data and its downloaded, derived assets."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SCENES_DATA_DIR = REPO_ROOT / "scenes"
TASKS_DIR = REPO_ROOT / "tasks"
CONFIGS_DIR = REPO_ROOT / "configs"

CACHE_ENV_VAR = "COLLAB_BENCH_CACHE"


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The asset cache directory.

    Resolution order: the explicit ``override`` (a config key), then the ``COLLAB_BENCH_CACHE``
    environment variable, then ``$XDG_CACHE_HOME/collab-bench`` (``~/.cache/collab-bench``).
    """
    if override:
        return Path(override).expanduser().resolve()
    env = os.environ.get(CACHE_ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "collab-bench"
