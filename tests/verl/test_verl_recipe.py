"""The verl recipe (baselines/verl/config) composed by Hydra on verl's own ppo_trainer config,
completed by the launcher and checked by verl's own config validation; no GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import hydra
import pytest
from omegaconf import OmegaConf
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import omega_conf_to_dataclass, validate_config
from verl_harness import compose_recipe

from baselines.verl.make_data import main as make_data
from baselines.verl.train import AGENT_LOOPS, prepare_config

TASK = "transport_apple_fridge_v0"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data")
    argv = ["--out", str(out), "--tasks", TASK, "--n-agents", "2", "--batch-size", "32"]
    assert make_data([*argv, "--train-seeds", "0:32", "--val-seeds", "0:4"]) == 0
    return out


def _validate(config: Any) -> None:
    validate_config(
        config=config,
        use_reference_policy=need_reference_policy(config),
        use_critic=need_critic(config),
    )


def test_grpo_recipe_composes_on_verls_config(data: Path, tiny_model: Path) -> None:
    config = prepare_config(compose_recipe("collab_bench_grpo", tiny_model, data))
    a = config.actor_rollout_ref
    assert config.algorithm.adv_estimator == "grpo" and not config.algorithm.use_kl_in_reward
    assert (
        a.rollout.name == "vllm" and a.rollout.n == 8 and a.rollout.tensor_model_parallel_size == 1
    )
    assert a.rollout.calculate_log_probs and a.rollout.val_kwargs.n == 1
    assert a.actor.use_kl_loss and a.actor.kl_loss_coef == 0.001 and a.actor.optim.lr == 1e-6
    assert not config.data.shuffle and config.data.train_batch_size % 2 == 0
    assert config.trainer.use_v1 and config.trainer.v1.trainer_mode == "collab_bench_sync"
    assert list(config.trainer.logger) == ["console", "tensorboard"]
    # verl's defaults underneath: keys the recipe does not set are verl's own.
    assert a.actor.strategy == "fsdp" and a.actor.clip_ratio == 0.2
    assert need_reference_policy(config) and not need_critic(config)
    # The policy's attention is SDPA (flash-attn is not in verl[vllm]), as verl builds it.
    model = omega_conf_to_dataclass(a.model)
    assert model.hf_config._attn_implementation == "sdpa" and model.use_remove_padding
    # The agent-loop file the launcher fills in: ours, and it names the collab_bench loop.
    path = Path(a.rollout.agent.agent_loop_config_path)
    assert path == AGENT_LOOPS and path.is_file()
    [entry] = OmegaConf.load(path)
    assert entry.name == a.rollout.agent.default_agent_loop == "collab_bench"
    assert hydra.utils.get_class(entry._target_).__name__ == "CollabBenchAgentLoop"
    assert Path(config.data.train_files).is_absolute() and Path(config.data.train_files).is_file()
    assert Path(config.trainer.default_local_dir).is_absolute()
    _validate(config)


def test_ppo_recipe_trains_a_critic_on_the_policy_model(data: Path, tiny_model: Path) -> None:
    config = prepare_config(compose_recipe("collab_bench_ppo", tiny_model, data))
    assert config.algorithm.adv_estimator == "gae" and config.algorithm.lam == 0.95
    assert config.critic.enable and need_critic(config)
    assert config.critic.model.path == str(tiny_model) == config.actor_rollout_ref.model.path
    assert config.critic.optim.lr == 1e-5 and config.actor_rollout_ref.rollout.n == 1
    assert config.trainer.v1.trainer_mode == "collab_bench_sync" and not config.data.shuffle
    _validate(config)


def test_the_scripts_overrides_reach_verls_keys(data: Path, tiny_model: Path) -> None:
    """What scripts/verl_train.sh passes for GPUS=8, NNODES=2 and the user's parameters."""
    overrides = [
        "trainer.n_gpus_per_node=8",
        "trainer.nnodes=2",
        "data.train_batch_size=64",
        "actor_rollout_ref.rollout.n=4",
        "actor_rollout_ref.actor.optim.lr=3e-6",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
    ]
    config = prepare_config(compose_recipe("collab_bench_grpo", tiny_model, data, overrides))
    assert config.trainer.n_gpus_per_node * config.trainer.nnodes == 16
    assert config.actor_rollout_ref.rollout.n == 4 and config.data.train_batch_size == 64
    assert config.actor_rollout_ref.actor.optim.lr == 3e-6
    assert config.actor_rollout_ref.actor.kl_loss_coef == 0.01
    _validate(config)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.shuffle=true"], "data.shuffle=true scatters"),
        (["data.train_batch_size=5"], "data.train_batch_size=5 with"),
        (["data.val_batch_size=3"], "is split between two batches of 3 rows"),
        (["trainer.v1.trainer_mode=sync"], "this launcher runs 'collab_bench_sync'"),
        (["trainer.use_v1=false"], "a verl V1 trainer"),
        (["actor_rollout_ref.rollout.agent.agent_loop_config_path=nowhere.yaml"], "no such file"),
    ],
)
def test_runs_that_would_break_episodes_are_refused_before_start(
    data: Path, tiny_model: Path, overrides: list[str], message: str
) -> None:
    config = compose_recipe("collab_bench_grpo", tiny_model, data, overrides)
    with pytest.raises(ValueError, match=message):
        prepare_config(config)


def test_missing_data_is_named(tmp_path: Path, tiny_model: Path) -> None:
    config = compose_recipe("collab_bench_grpo", tiny_model, tmp_path)
    with pytest.raises(ValueError, match=r"data.train_files: no file .*train.parquet"):
        prepare_config(config)


def test_the_launcher_module_composes_its_config(tmp_path: Path) -> None:
    """``python -m baselines.verl.train --cfg job`` prints the config it would train with."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ["--cfg", "job", "--config-name", "collab_bench_ppo", "actor_rollout_ref.model.path=/m"]
    out = subprocess.run(
        [sys.executable, "-m", "baselines.verl.train", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    config = OmegaConf.create(out.stdout)
    assert config.algorithm.adv_estimator == "gae"
    assert config.trainer.v1.trainer_mode == "collab_bench_sync"
    assert config.actor_rollout_ref.model.path == "/m"
    assert config.actor_rollout_ref.actor.strategy == "fsdp"  # verl's ppo_trainer underneath
