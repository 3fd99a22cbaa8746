"""The scene assets come from pinned registry wheels and are built reproducibly."""

from __future__ import annotations

import json
import zipfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmark import assets
from benchmark.assets import ALFWORLD, AssetError, fetch_wheel
from benchmark.paths import cache_dir, write_atomically
from benchmark.sim.scene_build import floor_standing, floor_top, inside_footprint
from benchmark.sim.scene_cache import ensure_scene_assets


def test_a_wheel_with_the_wrong_digest_is_rejected(tmp_path: Path) -> None:
    fake = tmp_path / "alfworld-0.4.2-py3-none-any.whl"
    with zipfile.ZipFile(fake, "w") as archive:
        archive.writestr("alfworld/gen/layouts/FloorPlan1-layout.npy", b"not the real file")
    with pytest.raises(AssetError, match="does not match the pinned"):
        fetch_wheel(ALFWORLD, tmp_path / "cache", wheel_path=fake)
    assert not (tmp_path / "cache" / "raw").exists() or not any(
        (tmp_path / "cache" / "raw").rglob("*.npy")
    )


def test_a_wheel_missing_a_pinned_member_is_rejected(tmp_path: Path) -> None:
    fake = tmp_path / "x.whl"
    with zipfile.ZipFile(fake, "w") as archive:
        archive.writestr("alfworld/other.txt", b"x")
    digest = assets.sha256_of(fake)
    with pytest.raises(AssetError, match="no member matching"):
        fetch_wheel(replace(ALFWORLD, sha256=digest), tmp_path / "cache", wheel_path=fake)


def test_fetching_again_is_a_no_op_once_verified(
    scene_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_download(*_args, **_kwargs):
        raise AssertionError("a verified asset must not be downloaded again")

    monkeypatch.setattr(assets, "_download", no_download)
    for asset in assets.SCENE_WHEELS:
        assert (fetch_wheel(asset, cache_dir()) / ".sha256").read_text().strip() == asset.sha256
    assert ensure_scene_assets() == scene_dir


def test_only_the_named_data_files_are_unpacked(scene_dir: Path) -> None:
    for asset in assets.SCENE_WHEELS:
        files = [p for p in assets.raw_dir(asset, cache_dir()).rglob("*") if p.is_file()]
        assert files
        assert not any(p.suffix == ".py" for p in files), "package code must never be unpacked"


def test_the_cache_directory_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COLLAB_BENCH_CACHE", str(tmp_path / "elsewhere"))
    assert cache_dir() == (tmp_path / "elsewhere").resolve()
    assert cache_dir(tmp_path / "key") == (tmp_path / "key").resolve()


def test_a_write_is_whole_or_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "rows.jsonl"
    write_atomically(target, "old\n")
    write_atomically(target, b"new\n")
    assert target.read_text() == "new\n"
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert target.stat().st_mode == plain.stat().st_mode  # readable as a plain write is
    plain.unlink()

    def crash(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("benchmark.paths.os.replace", crash)
    with pytest.raises(OSError, match="disk full"):
        write_atomically(target, "torn")
    assert target.read_text() == "new\n"  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]  # no temporary left


def test_grid_points_inside_floor_standing_furniture_are_removed(
    scene_dir: Path, recorded_metadata: dict, layouts_dir: Path
) -> None:
    manifest = json.loads((scene_dir / "manifest.json").read_text())
    raw_total = 0
    for name in manifest["scenes"]:
        scene = json.loads((scene_dir / f"{name}.json").read_text())
        objects = scene["objects"]
        standing = floor_standing(objects, floor_top(objects))
        by_id = {o["objectId"]: o for o in objects}
        for x, z in scene["reachable"]:
            assert not any(inside_footprint(x, z, o) for o in standing), (name, x, z)
        for x, z, blocker in scene["removed_reachable"]:
            assert inside_footprint(x, z, by_id[blocker])
        raw = np.load(layouts_dir / f"{name}-layout.npy")
        raw_total += len(raw)
        assert len(raw) == len(scene["reachable"]) + len(scene["removed_reachable"])
    share = manifest["removed_points"] / raw_total
    # About 1% of the recorded grid lies inside current furniture.
    assert 0.002 < share < 0.03, share
