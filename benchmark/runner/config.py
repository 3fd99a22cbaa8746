"""Structured configs of the runner, registered in Hydra's ConfigStore (one comment per field)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class SuiteEntry:
    task: str = "transport_produce_fridge_v0"  # task id, or a task file's path (ends in .yaml)
    split: str = "test"  # scene split the scene is drawn from: train | val | test
    n_agents: list[int] = field(default_factory=lambda: [2])  # team sizes to run
    seeds: list[int] = field(default_factory=lambda: [0])  # episode seeds
    scenes: list[str] = field(default_factory=list)  # pin floor plans: each seed on each of them


@dataclass
class SuiteConfig:
    name: str = "default"  # suite name, recorded in every result row
    version: str = "v1"  # suite version; results of different versions never mix
    entries: list[SuiteEntry] = field(default_factory=list)  # (task, split, n_agents, seeds) rows
    focal: str | None = None  # who plays agent_0, team | human; the challenge assigns the rest


@dataclass
class BaselineConfig:
    name: str = "oracle"  # registered team name (collab_bench.agents entry point) or module:Class
    kwargs: dict[str, Any] = field(default_factory=dict)  # constructor arguments of the team
    checkpoint: str | None = None  # learned teams (baseline=policy): model dir or saved policy
    env: dict[str, Any] = field(
        default_factory=dict
    )  # env options the team needs (observability...)


@dataclass
class LLMConfig:
    backend: str = "none"  # LLM backend for LLM baselines: none | smollm2 | hf | openai | vllm
    model: str = ""  # model name, directory or served model id
    options: dict[str, Any] = field(default_factory=dict)  # backend-specific options
    adapter: str | None = None  # a LoRA adapter on the model: a committed name or a directory
    constrained: bool = True  # LLM baselines decode under a schema of valid outputs; false: free


@dataclass
class LoggerConfig:
    console: bool = True  # rich progress bar and summary table
    wandb: bool = False  # log to Weights & Biases
    wandb_mode: str = "offline"  # offline | online | disabled
    wandb_project: str = "collab-bench"  # W&B project name
    tensorboard: bool = False  # write TensorBoard event files under <output_dir>/tensorboard
    prometheus: bool = False  # serve live gauges at http://<prometheus_host>:<port>/metrics
    prometheus_host: str = "127.0.0.1"  # address the /metrics endpoint listens on
    prometheus_port: int = 0  # its TCP port; 0 picks a free one (the URL is printed)
    prometheus_final_scrape_s: float = 0.0  # at the end, wait up to this long for a last scrape


@dataclass
class RayConfig:
    address: str | None = None  # null: start a local Ray; "auto" or a URL: join a cluster
    tmpdir: str | None = None  # Ray's temporary files; null: <output_dir>/ray (if short enough)


@dataclass
class RunConfig:
    suite: SuiteConfig = field(default_factory=SuiteConfig)  # what to run
    baseline: BaselineConfig = field(default_factory=BaselineConfig)  # who runs it
    llm: LLMConfig = field(default_factory=LLMConfig)  # the LLM, for LLM baselines
    logger: LoggerConfig = field(default_factory=LoggerConfig)  # where metrics go
    ray: RayConfig = field(default_factory=RayConfig)  # how Ray is reached
    env: dict[str, Any] = field(default_factory=dict)  # extra env options for every episode
    n_agents: Any = None  # int or list: override every suite entry's team sizes
    seeds: Any = None  # int or list: override every suite entry's seeds
    comm: list[bool] = field(
        default_factory=lambda: [True]
    )  # comm settings; [true,false] pairs runs
    workers: int = 2  # Ray workers; 0 runs every episode inline in this process
    reference: bool = True  # also run the one-agent reference for speedup
    challenge: str | None = None  # a challenge file (hidden-seed suites): run exactly its episodes
    reference_from: str | None = None  # a previous run directory whose one-agent rows serve instead
    replay: bool = False  # write a top-down GIF and an episode.html viewer per episode
    retries: int = 1  # retries of an episode that raises or whose worker dies, before an error row
    retry_errors: bool = False  # on resume: set error rows aside and play those episodes again
    batch_episodes: int = 1  # episodes a worker plays at once, their LLM calls batched together
    partners: Any = None  # a partner population (configs/partners): cross-play beside self-play
    swap: bool = False  # with partners: also each pairing with the seats exchanged (swap drop)
    output_dir: str = "${hydra:runtime.output_dir}"  # run directory (re-running into it resumes)


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunConfig)
