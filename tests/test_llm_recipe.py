"""``make train-llm`` (baselines/rl/recipes/llm_recipe/): what a finished run copies into
``baselines/adapters/`` (the names the paper tables load), its wall-time record and GRPO's
command line."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from baselines.rl.recipes import llm_recipe
from baselines.rl.recipes.llm_recipe import publish, report, stages


def _stage(directory: Path, marker: str, text: str) -> None:
    directory.mkdir(parents=True)
    (directory / marker).write_text(text)


@pytest.fixture
def adapters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    target = tmp_path / "adapters"
    target.mkdir()
    monkeypatch.setattr(publish, "ADAPTERS_DIR", target)
    return target


def test_publish_copies_each_finished_stage_and_the_tiny_policy(
    tmp_path: Path, adapters: Path
) -> None:
    where = tmp_path / "run" / "llm_agents"
    _stage(where / "sft" / "adapter", "adapter_config.json", '{"r": 16}')
    _stage(where / "dagger" / "sft1" / "adapter", "adapter_config.json", '{"round": 1}')
    _stage(where / "dagger" / "sft2" / "adapter", "adapter_config.json", '{"round": 2}')
    _stage(where / "tiny" / "model", "config.json", '{"tiny": true}')
    save_file({"w": torch.ones(2, 3)}, where / "tiny" / "model" / "model.safetensors")
    (where / "tiny" / "sft.json").write_text(json.dumps({"demonstrations_used": 4331}))
    (adapters / "policy-tiny-families").mkdir()
    (adapters / "policy-tiny-families" / "stale.bin").write_text("old")

    copied = publish.publish("llm_agents", where)

    assert copied == ["smollm2-agents-v4-sft", "smollm2-agents-v4-dagger", "policy-tiny-families"]
    assert (adapters / "smollm2-agents-v4-dagger" / "adapter_config.json").read_text() == (
        '{"round": 2}'
    )
    tiny = adapters / "policy-tiny-families"
    assert sorted(p.name for p in tiny.iterdir()) == [
        "config.json",
        "model.safetensors",
        "training.json",
    ]
    weights = load_file(tiny / "model.safetensors")["w"]
    assert weights.dtype == torch.bfloat16 and weights.float().eq(1).all()
    assert json.loads((tiny / "training.json").read_text()) == {"demonstrations_used": 4331}
    assert not (adapters / "smollm2-agents-v4-grpo").exists()  # GRPO has not finished


def test_publish_skips_an_unfinished_tiny_stage_and_the_planner_has_none(
    tmp_path: Path, adapters: Path
) -> None:
    where = tmp_path / "run"
    _stage(where / "tiny" / "model", "config.json", "{}")  # no sft.json: not finished
    assert publish.publish("llm_agents", where) == []
    (where / "tiny" / "sft.json").write_text("{}")
    assert publish.publish("llm_planner", where) == []


def test_publish_copies_grpo_with_its_training_log(tmp_path: Path, adapters: Path) -> None:
    where = tmp_path / "run" / "llm_agents"
    _stage(where / "grpo" / "final_adapter", "adapter_config.json", '{"grpo": true}')
    (where / "grpo" / "metrics.jsonl").write_text('{"kind": "eval", "step": 0}\n')

    assert publish.publish("llm_agents", where) == ["smollm2-agents-v4-grpo"]
    grpo = adapters / "smollm2-agents-v4-grpo"
    assert (grpo / "training.jsonl").read_text() == '{"kind": "eval", "step": 0}\n'


def test_stage_wall_times_add_up_over_invocations_and_an_interrupted_one_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter([0.0, 100.0, 1000.0, 1030.5, 2000.0, 2007.0])
    monkeypatch.setattr(report.time, "perf_counter", lambda: next(clock))
    with report.timed(tmp_path, "agents/sft"):
        pass
    with pytest.raises(KeyboardInterrupt), report.timed(tmp_path, "agents/sft"):
        raise KeyboardInterrupt  # a resumed stage: its time so far still counts
    with report.timed(tmp_path, "agents/grpo"):
        pass

    times = json.loads((tmp_path / report.TIMING).read_text())
    assert times == {"agents/sft": 130.5, "agents/grpo": 7.0}
    (fact,) = report.timing_facts(tmp_path)
    assert fact.endswith("agents/sft 130 s, agents/grpo 7 s; total 0.04 h")


@pytest.mark.parametrize(
    ("flags", "present", "absent"),
    [
        ([], ["guard.enabled=true", "eval.every=3", "eval.seed_start=2000000"], ["eval.every=0"]),
        (["--no-guard"], ["guard.enabled=false", "eval.every=0", "eval.episodes=0"], []),
    ],
)
def test_grpo_runs_under_the_kl_guard_unless_told_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list, present: list, absent: list
) -> None:
    start = tmp_path / "start"
    _stage(start, "adapter_config.json", "{}")
    commands: list[list[str]] = []
    monkeypatch.setattr(stages, "run_module", lambda command, log: commands.append(command))
    args = llm_recipe.parse_args([*flags, "--grpo-start", str(start)])
    stages.grpo("llm_agents", args, tmp_path / "run", None)
    (command,) = commands
    assert f"policy.adapter={start}" in command and "checkpoint_every=1" in command
    assert all(o in command for o in present) and not any(o in command for o in absent)
