"""make_data's parquet files, read back by verl's own RLHFDataset and collate_fn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

from baselines.verl.make_data import main
from baselines.verl.rows import EpisodeRow, check_batches
from benchmark.sim.facts import scene_splits

TASK = "transport_apple_fridge_v0"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data")
    argv = ["--out", str(out), "--tasks", TASK, "--n-agents", "2"]
    assert main([*argv, "--train-seeds", "0:3", "--val-seeds", "7,8", "--batch-size", "4"]) == 0
    return out


def _dataset(path: Path, tokenizer: Any) -> RLHFDataset:
    config = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 256,
            "return_raw_chat": True,
            "filter_overlong_prompts": False,
            "truncation": "error",
        }
    )
    return RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=config)


def test_verl_reads_the_rows_in_episode_order(written: Path, tiny_policy: Any) -> None:
    train = _dataset(written / "train.parquet", tiny_policy.tokenizer)
    assert len(train) == 6
    items = [train[i] for i in range(len(train))]
    rows = [EpisodeRow.from_extra_info(item["extra_info"]) for item in items]
    assert [(r.seed, r.agent) for r in rows] == [
        (s, f"agent_{k}") for s in range(3) for k in range(2)
    ]
    check_batches(rows, 2)
    for item in items:
        assert item["agent_name"] == "collab_bench" and item["data_source"] == "collab_bench"
        assert item["reward_model"] == {"style": "rule", "ground_truth": ""}
        assert item["raw_prompt"][0]["role"] == "user"
    batch = collate_fn(items[:4])
    assert list(batch["extra_info"][1].keys()) == list(items[1]["extra_info"].keys())
    assert rows[0].scene in scene_splits()["train"]


def test_validation_is_on_held_out_scenes(written: Path, tiny_policy: Any) -> None:
    val = _dataset(written / "val.parquet", tiny_policy.tokenizer)
    rows = [EpisodeRow.from_extra_info(val[i]["extra_info"]) for i in range(len(val))]
    assert {r.seed for r in rows} == {7, 8} and {r.split for r in rows} == {"val"}
    assert {r.scene for r in rows} <= set(scene_splits()["val"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-size", "3"], "split between two batches of 3 rows"),
        (["--train-seeds", "a:b"], "--train-seeds='a:b'"),
        (["--tasks", "no_such_task_v0"], "unknown task 'no_such_task_v0'"),
        (["--n-agents", "0"], "team sizes must be >= 1"),
        (["--val-split", "train"], "must differ from --train-split"),
    ],
)
def test_bad_options_fail_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    base = {"--out": str(tmp_path), "--tasks": TASK, "--train-seeds": "0:2", "--val-seeds": "0:1"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    assert main([x for pair in base.items() for x in pair]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "train.parquet").exists()
