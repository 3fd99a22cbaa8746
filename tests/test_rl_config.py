"""The training configuration: Hydra composes ``configs/train.yaml`` and command-line overrides
into the generated schema, and the frozen settings reject bad values with their dotted path and
the allowed values."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from baselines.rl.core.algos import ALGORITHMS
from baselines.rl.core.config import (
    AlgoSettings,
    ConfigError,
    PolicySettings,
    TrainConfig,
    TrainSettings,
    hydra_schema,
    register_configs,
    train_settings,
)

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _compose(*overrides: str) -> DictConfig:
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("train", overrides=["output_dir=/unused", *overrides])


def test_command_line_overrides_reach_the_validated_settings() -> None:
    settings = train_settings(
        _compose(
            "trainer=ppo",
            "steps=1",
            "trainer.group_by=[agent,turn]",
            "trainer.dual_clip=null",
            "policy=smollm2_lora",
            "data.tasks=[transport_apple_fridge_v0,switch_off_kitchen_v0]",
            "rollout.mode=concat",
        )
    )
    assert settings.steps == 1
    assert (settings.trainer.name, settings.trainer.return_mode) == ("ppo", "to_go")
    assert settings.trainer.group_by == ("agent", "turn")
    assert settings.trainer.dual_clip is None
    assert settings.policy.init == "smollm2" and settings.policy.lora
    assert settings.policy.lora_targets == ("q_proj", "v_proj")
    assert settings.data.tasks == ("transport_apple_fridge_v0", "switch_off_kitchen_v0")
    assert settings.rollout.mode == "concat"
    assert settings.output_dir == "/unused"


@pytest.mark.parametrize("name", sorted(p.stem for p in (CONFIGS / "trainer").glob("*.yaml")))
def test_every_trainer_config_composes_to_its_algorithm(name: str) -> None:
    """Each config is an algorithm of its own name, or a variant named ``<algorithm>_<what>``
    (``sppo_per_decision``)."""
    settings = train_settings(_compose(f"trainer={name}"))
    assert settings.trainer.name in ALGORITHMS
    assert name == settings.trainer.name or name.startswith(f"{settings.trainer.name}_")


def test_the_sppo_variant_keeps_the_earlier_per_decision_target() -> None:
    assert train_settings(_compose("trainer=sppo")).trainer.sppo_target == "per_trajectory"
    variant = train_settings(_compose("trainer=sppo_per_decision")).trainer
    assert (variant.name, variant.sppo_target) == ("sppo", "per_decision")


def test_the_schema_has_the_settings_fields_and_defaults() -> None:
    for section in (TrainSettings, AlgoSettings, PolicySettings):
        schema = hydra_schema(section)
        assert [f.name for f in dataclasses.fields(schema)] == [
            f.name for f in dataclasses.fields(section)
        ]
        assert not schema.__dataclass_params__.frozen
    assert hydra_schema(TrainSettings) is TrainConfig
    cfg = OmegaConf.structured(TrainConfig)
    cfg.output_dir = "/unused"
    assert train_settings(cfg) == TrainSettings(output_dir="/unused")


def test_settings_are_frozen() -> None:
    settings = train_settings(_compose())
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.trainer.name = "ppo"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.steps = 3  # type: ignore[misc]
    assert train_settings(settings) is settings


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.name=dqn"], "trainer.name='dqn' is not one of ['grpo', 'ppo', 'sppo']"),
        (["trainer.kl_estimator=k4"], "trainer.kl_estimator='k4' is not one of ['k1', 'k2'"),
        (["trainer.loss_agg=sum"], "trainer.loss_agg='sum' is not one of ['token-mean'"),
        (["trainer.return_mode=discounted"], "trainer.return_mode='discounted' is not one of"),
        (["trainer.group_by=[scene]"], "trainer.group_by=['scene'] may only hold ['agent', 'turn"),
        (["trainer.dual_clip=1.0"], "trainer.dual_clip=1.0 must be > 1 (or null: off)"),
        (["trainer.clip_low=1.5"], "trainer.clip_low=1.5 must be in [0.0, 1.0]"),
        (["trainer.lam=-0.1"], "trainer.lam=-0.1 must be in [0.0, 1.0]"),
        (["trainer.minibatch_size=0"], "trainer.minibatch_size=0 must be >= 1"),
        (["trainer.kl_coef=-1"], "trainer.kl_coef=-1.0 must be >= 0.0"),
        (["trainer.beta=0"], "trainer.beta=0.0 must be > 0"),
        (["trainer.sppo_target=mean"], "trainer.sppo_target='mean' is not one of ['per_trajec"),
        (["policy.sharing=mixed"], "policy.sharing='mixed' is not one of ['shared', 'per_agent']"),
        (["policy.generator=jax"], "policy.generator='jax' is not one of ['torch', 'vllm']"),
        (
            ["policy.sharing=per_agent", "policy.generator=vllm"],
            "policy.sharing='per_agent' needs one vLLM engine per agent",
        ),
        (["rollout.mode=stream"], "rollout.mode='stream' is not one of ['per_step', 'concat']"),
        (["rollout.ambiguity=vague"], "rollout.ambiguity='vague' is not one of ['explicit'"),
        (["rollout.top_p=0"], "rollout.top_p=0.0 must be in (0, 1]"),
        (["rollout.max_tokens=0"], "rollout.max_tokens=0 must be >= 1"),
        (["data.group_size=0"], "data.group_size=0 must be >= 1"),
        (["data.tasks=[]"], "data.tasks=[] must name at least one task"),
        (["eval.episodes=-1"], "eval.episodes=-1 must be >= 0"),
        (["threads=0"], "threads=0 must be >= 1"),
        (["+trainer.epochs=2"], "trainer.epochs=2 is not a config field; valid: ['name'"),
    ],
)
def test_bad_values_are_rejected_with_their_path_and_allowed_values(
    overrides: list[str], message: str
) -> None:
    cfg = _compose(*overrides)
    with pytest.raises(ConfigError) as err:
        train_settings(cfg)
    assert str(err.value).startswith(message)
