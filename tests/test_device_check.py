"""The GPU check (``scripts/device_check.sh``): its CPU run prints one JSON line per part with
positive figures; its bundle builder refuses what would not travel, and downloads the project's
own pins. The GPU figures themselves come from running the script on a GPU, not from here."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from baselines.rl.recipes import device_data
from benchmark.paths import REPO_ROOT


def _bundle_module():
    spec = importlib.util.spec_from_file_location(
        "device_bundle", REPO_ROOT / "scripts" / "device_bundle.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_cpu_run_prints_one_line_per_part_with_positive_figures() -> None:
    got = subprocess.run(
        [sys.executable, "-m", "baselines.rl.recipes.device_check", "--cpu", "--quick"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert got.returncode == 0, got.stderr[-3000:]
    lines = [json.loads(line) for line in got.stdout.splitlines() if line.strip()]
    assert [line["part"] for line in lines] == [
        "hf_generation",
        "grpo_update",
        "policy_train_step",
    ]
    hf, grpo, step = lines
    # What each part did is asserted (counts of tokens decoded and trained on). Its timed figures
    # are not asserted here (a busy machine's clock says nothing of the code): the check itself
    # refuses to print a line that lacks its part's timed figures or whose figure is not a finite
    # number (device_check.measured, tested below on lines without a clock), and their sizes are
    # `bash scripts/device_check.sh`'s figures.
    for batch in (1, 2):
        assert f"tokens_per_s_free_b{batch}" in hf and f"tokens_per_s_constrained_b{batch}" in hf
        # Every constrained reply was decoded under its decision schema to the end.
        assert hf["detail"][f"constrained_b{batch}"]["held"] == 1.0
        assert hf["detail"][f"constrained_b{batch}"]["tokens"] > 0
    assert grpo["batch"] == 4 and grpo["generated_tokens"] > 0
    assert grpo["tokens"] >= grpo["generated_tokens"]
    assert step["batch"] == 4 and step["model"] == "policy-tiny-families"
    assert step["generated_tokens"] > 0 and step["train_tokens"] >= step["generated_tokens"]
    assert all(line["device"] == "cpu" for line in lines)


def test_a_line_whose_figure_is_not_a_finite_number_is_refused() -> None:
    from baselines.rl.recipes.device_check import PARTS, REQUIRED, measured

    good = {"part": "grpo_update", "seconds": 1.5, "seconds_per_update": 1.5, "tokens_per_s": 10}
    assert measured(good) is good
    for bad in (float("nan"), float("inf"), None, "fast", True):
        with pytest.raises(ValueError, match=r"grpo_update: figure tokens_per_s="):
            measured({**good, "tokens_per_s": bad})
    for part, figures in REQUIRED.items():
        line = {"part": part, **dict.fromkeys(figures, 1.0)}
        assert measured(line) is line
        for figure in figures:
            with pytest.raises(ValueError, match=rf"{part}: timed figures missing: {figure}"):
                measured({k: v for k, v in line.items() if k != figure})
    assert set(REQUIRED) == set(PARTS)
    for part in (None, "decode"):
        with pytest.raises(ValueError, match=rf"a line of part {part!r}: expected one of"):
            measured({"part": part, "seconds": 1.0})


def test_without_cuda_the_check_refuses_and_says_how_to_dry_run() -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    got = subprocess.run(
        [sys.executable, "-m", "baselines.rl.recipes.device_check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode != 0
    assert "CUDA is not available" in got.stderr and "--cpu" in got.stderr


def test_bundle_over_the_limit_is_refused_naming_its_shares() -> None:
    bundle = _bundle_module()
    assert bundle.check_total({"working tree": 30 * 2**20, "wheels": 20 * 2**20}) == 50 * 2**20
    with pytest.raises(bundle.BundleTooLarge, match=r"70\.0 MiB, over the 64\.0 MiB.*wheels 40"):
        bundle.check_total({"working tree": 30 * 2**20, "wheels": 40 * 2**20})


def test_tree_bytes_counts_untracked_files_and_not_ignored_ones(tmp_path: Path) -> None:
    bundle = _bundle_module()
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("ignored/\n")  # 9 bytes
    (tmp_path / "kept.txt").write_text("x" * 100)
    (tmp_path / "ignored").mkdir()
    (tmp_path / "ignored" / "big.bin").write_bytes(b"0" * 10_000)
    assert bundle.tree_bytes(tmp_path) == 109


def test_bundle_wheels_are_the_projects_pins() -> None:
    bundle = _bundle_module()
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pins = {d.split("==")[0].lower(): d for d in project["dependencies"]}
    for wheel in bundle.WHEELS:
        name = wheel.split("==")[0]
        if name in pins:
            assert pins[name] == wheel


def test_recorded_decisions_hold_what_the_check_needs() -> None:
    data = device_data.load()
    assert len(data["llm_agents"]) >= 64 and len(data["policy"]) >= 64
    for d in data["llm_agents"]:
        assert d["chat"][0]["role"] == "system" and d["schema"]["type"] == "object"
        assert isinstance(d["reply"], str)
    for d in data["policy"]:
        assert d["prompt_ids"] and d["gen_ids"]
