"""Where the benchmark keeps its committed data and its downloaded, derived assets, and how it
writes a file so that no reader ever sees half of it."""

from __future__ import annotations

import os
import secrets
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


def write_atomically(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` through a temporary file of this process's own, then rename.

    A reader, or a second process writing the same path, sees the old file or the whole new one,
    never a part; a crash mid-write leaves the old file and no stray temporary. The file gets the
    permissions a plain write would (0666 less the umask), not a private temporary's 0600.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.part")
    handle = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
