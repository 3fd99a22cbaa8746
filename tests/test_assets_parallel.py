"""A cold asset cache found by several processes at once (test or Ray workers) is built once,
whole, and every process gets the built scenes."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from benchmark.assets import SCENE_WHEELS, raw_dir
from benchmark.paths import cache_dir
from benchmark.sim.scene_cache import ensure_scene_assets


def _build(root: str, builds: str, start, results) -> None:
    """Build the scenes under ``root`` once ``start`` lets every process go; each scene build
    that actually runs appends a line to ``builds``."""
    from benchmark.sim import scene_cache

    real = scene_cache.build_scene_files

    def counted(**kwargs) -> None:
        with open(builds, "a") as log:
            log.write("build\n")
        real(**kwargs)

    scene_cache.build_scene_files = counted
    start.wait()
    results.put(str(ensure_scene_assets(root)))


def test_two_processes_building_a_cold_cache_get_the_same_complete_scenes(
    scene_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "cache"
    for asset in SCENE_WHEELS:
        # The verified wheel contents are shared, so only the scene build is cold.
        link = raw_dir(asset, root)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(raw_dir(asset, cache_dir()), target_is_directory=True)
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Barrier(2), ctx.Queue()
    builds = tmp_path / "builds.log"
    procs = [
        ctx.Process(target=_build, args=(str(root), str(builds), start, results)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    assert builds.read_text() == "build\n", "the second process waits and reuses the first build"
    built = {Path(results.get(timeout=10)) for _ in procs}
    assert len(built) == 1
    (out,) = built
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in scene_dir.iterdir())
    for reference in scene_dir.iterdir():
        assert (out / reference.name).read_bytes() == reference.read_bytes(), reference.name
