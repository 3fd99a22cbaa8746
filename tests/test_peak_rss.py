"""The peak RSS of one episode, measured in a fresh process (what ``bench llm`` reports)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmark.paths import REPO_ROOT
from benchmark.runner.jobs import Job
from benchmark.runner.peak_rss import episode_peak_rss

TASK = "switch_off_bedroom_v0"
FULL = {"observability": "full"}


@pytest.fixture(autouse=True)
def children_see_test_teams(monkeypatch: pytest.MonkeyPatch) -> None:
    """The measured process inherits this environment: let it import ``helpers.teams``."""
    paths = [str(REPO_ROOT / "tests"), str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))


def _dying(tmp_path: Path, **kwargs: object) -> Job:
    options = {"task": TASK, "marker_dir": str(tmp_path), "driver_pid": os.getpid(), **kwargs}
    return Job(TASK, "test", 2, 0, True, "helpers.teams:DyingTeamForTests", options, FULL)


def test_an_episode_is_measured_in_its_own_process(tmp_path: Path) -> None:
    # The measuring process holds 600 MiB: none of it may count (Linux carries a parent's peak
    # into its child's ru_maxrss).
    ballast = b"\x01" * (600 << 20)
    plain = episode_peak_rss(Job(TASK, "test", 2, 0, True, "oracle", {}, FULL))
    del ballast
    assert plain["status"] == "ok" and plain["episode_s"] is not None
    assert 20 < plain["peak_rss_mb"] < 600, plain
    # The same episode holding 300 MiB more: the figure is that process's own peak.
    hoarding = episode_peak_rss(
        _dying(tmp_path, how="wait", hoard_mb=300), cap_mb=plain["peak_rss_mb"] + 150
    )
    assert hoarding["status"] == "killed" and "cap" in hoarding["reason"], hoarding
    assert hoarding["peak_rss_mb"] > plain["peak_rss_mb"] + 150
    assert hoarding["episode_s"] is None


def test_a_process_that_dies_is_reported_with_its_signal(tmp_path: Path) -> None:
    died = episode_peak_rss(_dying(tmp_path))
    assert died["status"] == "killed" and "signal 9" in died["reason"], died
    assert died["peak_rss_mb"] > 20 and len(list(tmp_path.glob("*.death*"))) == 1


def test_an_episode_that_raises_is_reported_as_an_error(tmp_path: Path) -> None:
    failed = episode_peak_rss(Job(TASK, "test", 2, 0, True, "no_such_team", {}, FULL))
    assert failed["status"] == "error" and "no_such_team" in failed["reason"], failed


def test_episodes_played_at_once_are_measured_in_one_process(tmp_path: Path) -> None:
    plain = Job(TASK, "test", 2, 0, True, "oracle", {}, FULL)
    other = Job("switch_off_kitchen_v0", "test", 2, 1, True, "oracle", {}, FULL)
    both = episode_peak_rss([plain, other])
    assert both["status"] == "ok" and both["episode_s"] is not None, both
    # One episode of the batch fails: the batch reports it.
    failed = episode_peak_rss([plain, Job(TASK, "test", 2, 0, True, "no_such_team", {}, FULL)])
    assert failed["status"] == "error" and "no_such_team" in failed["reason"], failed
    # One of them hoards 300 MiB: the figure and the cap are the whole process's.
    hoarding = episode_peak_rss(
        [plain, _dying(tmp_path, how="wait", hoard_mb=300)], cap_mb=both["peak_rss_mb"] + 150
    )
    assert hoarding["status"] == "killed" and "cap" in hoarding["reason"], hoarding
    assert hoarding["peak_rss_mb"] > both["peak_rss_mb"] + 150, (hoarding, both)
    with pytest.raises(ValueError, match="no job"):
        episode_peak_rss([])
    with pytest.raises(TypeError, match="job 1 is a dict"):
        episode_peak_rss((plain, {"task": TASK}))
