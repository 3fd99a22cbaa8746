"""The configuration of the RL trainers (and of SFT).

Each section is declared once, as a frozen settings dataclass that validates itself in
``__post_init__`` (one comment per field). Hydra cannot merge config files and overrides into
a frozen dataclass (OmegaConf makes it read-only), so its schema is a generated mutable twin
with the same fields and defaults (:func:`hydra_schema`): ``TrainConfig``, registered in
Hydra's ConfigStore and composed by ``configs/train.yaml``. :func:`train_settings` turns the
composed config into validated :class:`TrainSettings`, so a bad value is rejected with its
dotted path and the allowed values before anything runs.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from baselines.rl.core.algos import AGGREGATIONS, ALGORITHMS, KL_ESTIMATORS, SPPO_TARGETS
from baselines.rl.core.checks import ConfigError, at_least, in_range, one_of
from baselines.rl.core.guard import GuardSettings
from baselines.rl.core.rollout import RolloutSettings
from baselines.rl.core.samples import GROUP_BY, RETURN_MODES
from benchmark.runner.config import LoggerConfig, RayConfig

SHARING = ("shared", "per_agent")
GENERATORS = ("torch", "vllm")  # rollout generation: torch here, vLLM on a GPU


@dataclass(frozen=True)
class AlgoSettings:
    name: str = "grpo"  # grpo | ppo | sppo (baselines/rl/core/algos.py ALGORITHMS)
    norm_by_std: bool = True  # GRPO: divide by the group std (false gives Dr.GRPO)
    beta: float = 1.0  # SPPO: temperature of the soft-mean baseline
    eta: float = 1.0  # SPPO: scale of the advantage the log-ratio regresses to
    sppo_target: str = "per_trajectory"  # SPPO: per_trajectory | per_decision (algos.sppo_targets)
    clip_low: float = 0.2  # policy ratio clip below 1
    clip_high: float = 0.2  # policy ratio clip above 1
    dual_clip: float | None = 3.0  # dual clip c for negative advantages (null: off)
    kl_coef: float = 0.0  # weight of KL(pi || reference) in the loss
    kl_estimator: str = "k3"  # k1 | k2 | k3
    loss_agg: str = "token-mean"  # token-mean | seq-mean-token-sum | seq-mean-token-mean | ...-norm
    entropy_coef: float = 0.0  # entropy bonus weight
    gamma: float = 1.0  # PPO: discount over generated tokens
    lam: float = 0.95  # PPO: GAE lambda
    vf_coef: float = 0.5  # PPO: value loss weight
    value_clip: float = 0.2  # PPO: value clip
    return_mode: str = "episode"  # episode | to_go: the return R a sample is judged by
    turn_gamma: float = 1.0  # discount between an agent's decisions for to_go returns
    group_by: tuple[str, ...] = ()  # add "agent" and/or "turn" to the seed key
    filter_zero_variance: bool = True  # drop groups whose returns are all equal (dynamic sampling)
    balance_trajectories: bool = True  # weigh every agent trajectory equally in clipped losses
    ppo_epochs: int = 1  # passes over each batch
    max_samples: int = 0  # update on a seeded random subsample of this many samples (0: all)
    minibatch_size: int = 64  # samples per optimiser step
    lr: float = 1e-4  # AdamW learning rate
    weight_decay: float = 0.0  # AdamW weight decay
    max_grad_norm: float = 1.0  # gradient clipping

    def __post_init__(self) -> None:
        one_of(self, "name", ALGORITHMS)
        one_of(self, "kl_estimator", KL_ESTIMATORS)
        one_of(self, "loss_agg", AGGREGATIONS)
        one_of(self, "return_mode", RETURN_MODES)
        one_of(self, "sppo_target", SPPO_TARGETS)
        if set(self.group_by) - set(GROUP_BY):
            raise ConfigError("group_by", list(self.group_by), f"may only hold {list(GROUP_BY)}")
        in_range(self, "clip_low", 0.0, 1.0)
        in_range(self, "gamma", 0.0, 1.0)
        in_range(self, "lam", 0.0, 1.0)
        in_range(self, "turn_gamma", 0.0, 1.0)
        at_least(self, 0.0, "clip_high", "kl_coef", "vf_coef", "value_clip", "weight_decay")
        at_least(self, 1, "ppo_epochs", "minibatch_size")
        at_least(self, 0, "max_samples")
        if self.dual_clip is not None and self.dual_clip <= 1:
            raise ConfigError("dual_clip", self.dual_clip, "must be > 1 (or null: off)")
        for name in ("beta", "lr", "max_grad_norm"):
            if getattr(self, name) <= 0:
                raise ConfigError(name, getattr(self, name), "must be > 0")


@dataclass(frozen=True)
class PolicySettings:
    init: str = "sft-tiny"  # model dir, "smollm2", or a policy name under <cache>/policies
    sharing: str = "shared"  # shared (agent identity in the prompt) | per_agent (own weights)
    lora: bool = False  # train LoRA adapters (peft) instead of all weights
    lora_r: int = 8  # LoRA rank
    lora_alpha: int = 16  # LoRA scale
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")  # modules given adapters
    lora_layers: int = 0  # LoRA on the top k transformer layers only (0: every layer)
    adapter: str | None = None  # lora: start from this adapter (committed name or directory)
    adapter_out: str | None = None  # lora: save the final adapter as baselines/adapters/<name>
    generator: str = "torch"  # torch | vllm (GPU; the gpu extra)
    device: str = "cpu"  # torch device of the trainer's model

    def __post_init__(self) -> None:
        one_of(self, "sharing", SHARING)
        one_of(self, "generator", GENERATORS)
        at_least(self, 1, "lora_r", "lora_alpha")
        at_least(self, 0, "lora_layers")
        if (self.adapter or self.adapter_out) and not self.lora:
            raise ConfigError("adapter", self.adapter or self.adapter_out, "needs policy.lora=true")
        if self.sharing == "per_agent" and self.generator == "vllm":
            raise ConfigError(
                "sharing",
                self.sharing,
                "needs one vLLM engine per agent; use generator=torch or sharing=shared",
            )


@dataclass(frozen=True)
class DataSettings:
    tasks: tuple[str, ...] = ("transport_apple_fridge_v0",)  # task ids
    n_agents: int = 2  # team size
    split: str = "train"  # scene split of the training episodes
    seed_start: int = 0  # first training episode seed
    seed_count: int = 100_000  # training seeds cycle through [start, start + count)
    seeds_per_step: int = 8  # distinct episode seeds per update (B)
    group_size: int = 4  # rollouts per seed (G): the group of group-relative advantages

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ConfigError("tasks", list(self.tasks), "must name at least one task")
        at_least(self, 1, "n_agents", "seed_count", "seeds_per_step", "group_size")


@dataclass(frozen=True)
class EvalSettings:
    every: int = 15  # evaluate every this many steps (0: only before and after)
    split: str = "val"  # scene split of the held-out episodes
    seed_start: int = 1_000_000  # held-out seeds, disjoint from training seeds
    episodes: int = 64  # held-out episodes per evaluation
    temperature: float = 1.0  # the policy's own sampling (0: greedy, which loops on ties)

    def __post_init__(self) -> None:
        at_least(self, 0, "every", "episodes", "temperature")


@dataclass(frozen=True)
class TrainSettings:
    trainer: AlgoSettings = field(default_factory=AlgoSettings)  # the algorithm
    policy: PolicySettings = field(default_factory=PolicySettings)  # the model
    rollout: RolloutSettings = field(default_factory=RolloutSettings)  # how episodes are played
    data: DataSettings = field(default_factory=DataSettings)  # which episodes
    eval: EvalSettings = field(default_factory=EvalSettings)  # held-out evaluation
    guard: GuardSettings = field(
        default_factory=GuardSettings
    )  # KL guard (baselines/rl/core/guard.py)
    logger: LoggerConfig = field(default_factory=LoggerConfig)  # console / wandb / tb / prometheus
    ray: RayConfig = field(default_factory=RayConfig)  # how Ray is reached
    steps: int = 100  # updates
    max_minutes: float = 0.0  # stop after this wall time (0: no limit)
    workers: int = 2  # Ray rollout actors; 0 plays episodes in the trainer's process
    seed: int = 0  # seeds sampling and minibatch order
    threads: int = 2  # torch threads of the trainer
    checkpoint_every: int = 10  # steps between checkpoints (the last step is always saved)
    keep_checkpoints: int = 2  # checkpoints kept on disk (0: all)
    resume: bool = True  # continue from the latest checkpoint in output_dir
    output_dir: str = "${hydra:runtime.output_dir}"  # run directory

    def __post_init__(self) -> None:
        at_least(self, 0, "steps", "max_minutes", "workers", "keep_checkpoints")
        at_least(self, 1, "threads", "checkpoint_every")


_Settings = TypeVar("_Settings")
_SCHEMAS: dict[type, type] = {}


def hydra_schema(settings: type) -> type:
    """The mutable twin of a frozen settings dataclass, for Hydra to compose into: the same
    field names, types and defaults (nested frozen sections become their own twins), no
    validation. Named after ``settings`` with ``Settings`` replaced by ``Config``."""
    if settings in _SCHEMAS:
        return _SCHEMAS[settings]
    hints = typing.get_type_hints(settings)
    spec = []
    for f in dataclasses.fields(settings):
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen:
            twin = hydra_schema(kind)
            spec.append((f.name, twin, field(default_factory=twin)))
        else:
            spec.append((f.name, kind, field(default=f.default, default_factory=f.default_factory)))
    name = settings.__name__.replace("Settings", "Config")
    schema = dataclasses.make_dataclass(name, spec, namespace={"__module__": __name__})
    _SCHEMAS[settings] = schema
    return schema


def from_mapping(settings: type[_Settings], values: Mapping[str, Any]) -> _Settings:
    """Build ``settings`` (a dataclass) from plain ``values``, nested sections included; lists
    become tuples where the field is a tuple. Raises :class:`ConfigError` for a key that is not
    a field or a value its section rejects, named by its dotted path."""
    hints = typing.get_type_hints(settings)
    names = [f.name for f in dataclasses.fields(settings)]
    for key in values:
        if key not in names:
            raise ConfigError(key, values[key], f"is not a config field; valid: {names}")
    kwargs = {}
    for name, value in values.items():
        kind = hints[name]
        if dataclasses.is_dataclass(kind):
            try:
                value = from_mapping(kind, value)
            except ConfigError as err:
                raise err.within(name) from None
        elif typing.get_origin(kind) is tuple:
            value = tuple(value)
        kwargs[name] = value
    return settings(**kwargs)


def train_settings(cfg: TrainSettings | DictConfig) -> TrainSettings:
    """Validated settings from a composed training config (Hydra's, or
    ``OmegaConf.structured(TrainConfig)`` with changes merged in); interpolations resolved."""
    if isinstance(cfg, TrainSettings):
        return cfg
    return from_mapping(TrainSettings, OmegaConf.to_container(cfg, resolve=True))


TrainConfig = hydra_schema(TrainSettings)
RolloutConfig = hydra_schema(RolloutSettings)


@dataclass
class SFTConfig:
    teacher: str = "heuristic"  # scripted team whose decisions are imitated: heuristic | oracle
    tasks: list[str] = field(default_factory=lambda: ["transport_apple_fridge_v0"])  # task ids
    n_agents: int = 2  # team size
    split: str = "train"  # scene split of the teacher's episodes
    seed_start: int = 0  # first teacher episode seed
    episodes: int = 400  # teacher episodes
    init: str = "tiny"  # "tiny" (new model and tokenizer), "smollm2" or a model directory
    tiny: dict[str, Any] = field(
        default_factory=lambda: {"hidden": 128, "layers": 4, "heads": 4, "vocab": 1000}
    )  # size of a new tiny model
    rollout: RolloutConfig = field(default_factory=RolloutConfig)  # prompt format (history...)
    format: str = "rl_view"  # rl_view (the policy team) | llm_agents | llm_planner (their prompts)
    prompt: str | None = None  # llm_* formats: the baseline's prompt template (null: its default)
    max_subtasks: int = 8  # llm_planner: most subtasks in a demonstrated plan
    successful_only: bool = False  # learn only from the episodes the teacher solved
    max_demos: int = 0  # keep this many demonstrations, drawn evenly (0: all)
    routine_weight: float = 1.0  # loss weight of explore/wait decisions (the rest weigh 1)
    routine_keep: float = 1.0  # share of the explore/wait demonstrations kept (seeded draw)
    demos_file: str | None = None  # train on these demonstrations (jsonl) instead of playing
    init_adapter: str | None = None  # lora: start from this adapter (committed name or dir)
    checkpoint_every: int = 50  # optimizer steps between resumable checkpoints (0: none)
    bf16: bool = False  # matmuls in bfloat16 (autocast; weights and optimizer stay float32)
    resume: bool = True  # continue from output_dir's checkpoint when there is one
    lora: bool = False  # train LoRA adapters (peft) instead of all weights
    lora_r: int = 8  # LoRA rank
    lora_alpha: int = 16  # LoRA scale
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])  # adapted
    lora_layers: int = 0  # LoRA on the top k transformer layers only (0: every layer)
    adapter: str | None = None  # lora: also save the adapter as baselines/adapters/<adapter>
    epochs: int = 3  # passes over the demonstrations
    batch_size: int = 32  # demonstrations per step
    lr: float = 1e-3  # AdamW learning rate
    seed: int = 0  # seeds initialisation and shuffling
    threads: int = 2  # torch threads
    name: str | None = "sft-tiny"  # also saved as <cache>/policies/<name> (null: run dir only)
    output_dir: str = "${hydra:runtime.output_dir}"  # run directory (data, log, model copy)


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="sft_schema", node=SFTConfig)
