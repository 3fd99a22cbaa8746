"""Structured configs of the RL trainers and of SFT, registered in Hydra's ConfigStore (one
comment per field). ``configs/train.yaml`` and ``configs/sft.yaml`` compose them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from benchmark.runner.config import LoggerConfig, RayConfig

ALGORITHMS = ("grpo", "ppo", "sppo")
SHARING = ("shared", "per_agent")


@dataclass
class AlgoConfig:
    name: str = "grpo"  # grpo | ppo | sppo
    norm_by_std: bool = True  # GRPO: divide by the group std (false gives Dr.GRPO)
    beta: float = 1.0  # SPPO: temperature of the soft-mean baseline
    eta: float = 1.0  # SPPO: scale of the advantage the log-ratio regresses to
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
    group_by: list[str] = field(default_factory=list)  # add "agent" and/or "turn" to the seed key
    filter_zero_variance: bool = True  # drop groups whose returns are all equal (dynamic sampling)
    balance_trajectories: bool = True  # weigh every agent trajectory equally in clipped losses
    ppo_epochs: int = 1  # passes over each batch
    minibatch_size: int = 64  # samples per optimiser step
    lr: float = 1e-4  # AdamW learning rate
    weight_decay: float = 0.0  # AdamW weight decay
    max_grad_norm: float = 1.0  # gradient clipping


@dataclass
class PolicyConfig:
    init: str = "sft-tiny"  # model dir, "smollm2", or a policy name under <cache>/policies
    sharing: str = "shared"  # shared (agent identity in the prompt) | per_agent (own weights)
    lora: bool = False  # train LoRA adapters (peft) instead of all weights
    lora_r: int = 8  # LoRA rank
    lora_alpha: int = 16  # LoRA scale
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])  # modules
    generator: str = "torch"  # torch | vllm (GPU; the gpu extra)
    device: str = "cpu"  # torch device of the trainer's model


@dataclass
class RolloutConfig:
    mode: str = "per_step"  # per_step (bounded history) | concat (one sequence per agent)
    history: int = 2  # past actions a per_step prompt repeats
    max_objects: int = 8  # known objects a prompt lists
    max_tokens: int = 12  # tokens generated per decision
    temperature: float = 1.0  # rollout sampling temperature
    top_p: float = 1.0  # rollout nucleus sampling
    max_context: int = 1024  # concat: longer agent sequences start a new segment
    reward_sharing: float = 0.7  # alpha: team share of each agent's reward
    comm: bool = True  # messages delivered
    ambiguity: str = "types"  # instruction phrasing


@dataclass
class DataConfig:
    tasks: list[str] = field(default_factory=lambda: ["transport_apple_fridge_v0"])  # task ids
    n_agents: int = 2  # team size
    split: str = "train"  # scene split of the training episodes
    seed_start: int = 0  # first training episode seed
    seed_count: int = 100_000  # training seeds cycle through [start, start + count)
    seeds_per_step: int = 8  # distinct episode seeds per update (B)
    group_size: int = 4  # rollouts per seed (G): the group of group-relative advantages


@dataclass
class EvalConfig:
    every: int = 15  # evaluate every this many steps (0: only before and after)
    split: str = "val"  # scene split of the held-out episodes
    seed_start: int = 1_000_000  # held-out seeds, disjoint from training seeds
    episodes: int = 64  # held-out episodes per evaluation
    temperature: float = 1.0  # the policy's own sampling (0: greedy, which loops on ties)


@dataclass
class TrainConfig:
    trainer: AlgoConfig = field(default_factory=AlgoConfig)  # the algorithm
    policy: PolicyConfig = field(default_factory=PolicyConfig)  # the model
    rollout: RolloutConfig = field(default_factory=RolloutConfig)  # how episodes are played
    data: DataConfig = field(default_factory=DataConfig)  # which episodes
    eval: EvalConfig = field(default_factory=EvalConfig)  # held-out evaluation
    logger: LoggerConfig = field(default_factory=LoggerConfig)  # console / wandb / tensorboard
    ray: RayConfig = field(default_factory=RayConfig)  # how Ray is reached
    steps: int = 100  # updates
    max_minutes: float = 0.0  # stop after this wall time (0: no limit)
    workers: int = 2  # Ray rollout actors; 0 plays episodes in the trainer's process
    seed: int = 0  # seeds sampling and minibatch order
    threads: int = 2  # torch threads of the trainer
    checkpoint_every: int = 10  # steps between checkpoints (the last step is always saved)
    keep_checkpoints: int = 2  # checkpoints kept on disk
    resume: bool = True  # continue from the latest checkpoint in output_dir
    output_dir: str = "${hydra:runtime.output_dir}"  # run directory


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
