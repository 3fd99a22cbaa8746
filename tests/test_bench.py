"""The benchmark command produces its JSON figures (speed targets are checked by running it,
not here)."""

from __future__ import annotations

import json

import pytest

from benchmark.bench.cli import main
from benchmark.bench.env import bench_sim, random_actions


def test_random_primitive_actions_are_well_formed() -> None:
    from benchmark.sim.actions import validate

    for act in random_actions(["Apple|1|2|3"], 500, seed=1):
        name = act["action"]
        validate(name, {k: v for k, v in act.items() if k != "action"})


def test_bench_sim_reports_every_figure(capsys) -> None:
    figures = bench_sim(steps=400, repeats=1, load_scenes=["FloorPlan1", "FloorPlan201"])
    for key in ("agent_steps_per_s", "metadata_ms", "reset_ms", "scene_load_ms"):
        assert figures[key] > 0
    assert main(["sim", "--repeats", "1"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(line)["bench"] == "sim"


def test_the_rss_probe_is_an_option_of_the_llm_bench_only(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["sim", "--rss"])
    assert exit_info.value.code == 2
    assert "--rss is an option of the llm bench" in capsys.readouterr().err
