"""What the verl tests share: a CPU stand-in for verl's rollout server, the trainer config the
agent loop reads, the loops made the way verl's AgentLoopWorker makes them, verl's own
post-processing of their outputs into a DataProto, and the CollabBench trainer built from the
recipe as verl's ``init`` builds it, without its GPU parts."""

from __future__ import annotations

import asyncio
import types
from dataclasses import dataclass
from typing import Any

import hydra
import numpy as np
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

import baselines.verl.agent_loop  # noqa: F401  (registers collab_bench)
from baselines.rl.core.policy import Policy
from benchmark.llm.base import Sampling


@dataclass
class Call:
    request_id: str
    prompt_ids: list[int]
    token_ids: list[int]
    log_probs: list[float]


class CPUServerManager:
    """A stand-in ONLY for verl's GPU inference server (``LLMServerClient``): the same
    ``generate(request_id, *, prompt_ids, sampling_params)`` returning a ``TokenOutput``, served
    by the RL trainer's torch policy (token ids in, token ids and logprobs out, the end-of-
    sequence token kept as vLLM keeps it). Each call is seeded by its order and recorded."""

    def __init__(self, policy: Policy, global_steps: int = 7) -> None:
        self.policy = policy
        self.global_steps = global_steps
        self.calls: list[Call] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        sampling = Sampling(
            max_tokens=int(sampling_params["max_tokens"]),
            temperature=float(sampling_params.get("temperature", 1.0)),
            top_p=float(sampling_params.get("top_p", 1.0)),
            seed=len(self.calls),
        )
        [(ids, logprobs)] = self.policy.generate([list(prompt_ids)], sampling)
        self.calls.append(Call(request_id, list(prompt_ids), ids, logprobs))
        await asyncio.sleep(0)  # let the other agents' loops run, as a server's wait would
        steps = self.global_steps
        return TokenOutput(
            token_ids=ids,
            log_probs=logprobs if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={
                "global_steps": steps,
                "min_global_steps": steps,
                "max_global_steps": steps,
            },
        )

    def by_request(self, request_id: str) -> list[Call]:
        return [c for c in self.calls if c.request_id == request_id]


def trainer_config(prompt_length: int = 1024, response_length: int = 1024, batch: int = 4) -> Any:
    """The parts of verl's trainer config the agent loop and the post-processing read."""
    return OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {
                    "prompt_length": prompt_length,
                    "response_length": response_length,
                    "multi_turn": {"tool_config_path": None},
                },
                "model": {"path": "tiny", "tokenizer_path": "tiny"},
            },
            "data": {
                "tool_config_path": None,
                "apply_chat_template_kwargs": {},
                "shuffle": False,
                "train_batch_size": batch,
            },
        }
    )


def make_loop(config: Any, server: Any, tokenizer: Any, **settings: Any) -> Any:
    """The collab_bench loop as AgentLoopWorker._run_agent_loop makes it: hydra instantiates
    the registered entry with verl's arguments (and ``settings``, as the agent-loop yaml's
    keys would be)."""
    entry = OmegaConf.create({**_agent_loop_registry["collab_bench"], **settings})
    return hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


def _worker(config: Any, tokenizer: Any) -> Any:
    """A duck-typed AgentLoopWorker ``self`` for its post-processing methods, as verl's own
    CPU test of the agent loop builds it."""
    w = types.SimpleNamespace(
        tokenizer=tokenizer,
        rollout_config=config.actor_rollout_ref.rollout,
        processor=None,
        mm_processor_kwargs={},
        reward_loop_worker_handles=None,
        distillation_enabled=False,
    )
    for name in (
        "_pad_token_ids",
        "_compute_multi_modal_inputs",
        "_compute_position_ids",
        "_get_mm_processor_kwargs",
        "_compute_score",
        "_compute_teacher_logprobs",
    ):
        setattr(w, name, types.MethodType(getattr(AgentLoopWorker, name), w))
    return w


async def postprocess(
    config: Any, tokenizer: Any, outputs: list[Any], non_tensor: dict[str, np.ndarray]
) -> DataProto:
    """verl V0's post-processing: each output padded (``_agent_loop_postprocess``), then the
    batch (``_postprocess``) with the input rows' non-tensor columns."""
    w = _worker(config, tokenizer)
    raw = non_tensor["raw_prompt"]
    padded = [
        await AgentLoopWorker._agent_loop_postprocess(w, o, validate=False, raw_prompt=raw[i])
        for i, o in enumerate(outputs)
    ]
    return AgentLoopWorker._postprocess(w, padded, input_non_tensor_batch=non_tensor)


class CPUAgentLoopManagerTQ:
    """A stand-in for verl V1's ``AgentLoopManagerTQ``, whose workers are Ray actors on GPU
    machines: one worker in this process, an instance of verl's own ``AgentLoopWorkerTQ`` class
    (its ``__init__``, which starts servers, skipped) with the attributes it reads, served by
    ``server``. ``generate_sequences`` runs verl's own ``generate_sequences`` (one task per row
    and session, each agent loop's outputs written to TransferQueue) and, unlike verl's
    fire-and-forget call, waits for every loop, on one event loop kept across calls."""

    def __init__(self, config: Any, server: Any, tokenizer: Any) -> None:
        from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

        worker = object.__new__(AgentLoopWorkerTQ.__ray_actor_class__)
        worker.config = config
        worker.llm_client = server
        worker.tokenizer = tokenizer
        worker.processor = None
        worker.hf_model_type = None
        worker.dataset_cls = RLHFDataset
        worker.tools = []
        worker.reward_loop_worker_handles = None
        worker.distillation_enabled = False
        worker.background_tasks = set()
        self.worker = worker
        self.loop = asyncio.new_event_loop()

    def generate_sequences(self, prompts: Any) -> None:
        async def run() -> None:
            await self.worker.generate_sequences(prompts)
            await asyncio.gather(*list(self.worker.background_tasks))

        self.loop.run_until_complete(run())
        # verl logs a failed loop and tags its prompt "failure"; a test must see it at once.
        import transfer_queue as tq

        uids = set(prompts["uid"])
        for partition in ("train", "val"):
            tags = tq.kv_list(partition).get(partition, {})
            failed = [k for k in uids if tags.get(k, {}).get("status") == "failure"]
            assert not failed, f"agent loops failed for prompts {failed} ({partition})"

    def close(self) -> None:
        self.loop.close()


def compose_recipe(
    name: str, model: Any, data_dir: Any, overrides: list[str] | tuple[str, ...] = ()
) -> Any:
    """The recipe ``name`` (``baselines/verl/config``) composed by Hydra on verl's own
    ``ppo_trainer`` config, for ``model`` and make_data's files in ``data_dir``."""
    from hydra import compose, initialize_config_dir

    from baselines.verl.train import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(
            name,
            overrides=[
                f"actor_rollout_ref.model.path={model}",
                f"data.train_files={data_dir}/train.parquet",
                f"data.val_files={data_dir}/val.parquet",
                *overrides,
            ],
        )


def recipe_trainer_config(
    model: Any, data_dir: Any, hub_name: str, overrides: list[str] | tuple[str, ...] = ()
) -> tuple[Any, Any]:
    """The GRPO recipe for the tests' trainer: ``rollout.n=2``, batches of 4 rows, old
    logprobs from the rollout (no GPU actor computes them), prepared by the launcher and
    resolved; and the agent-loop entry as verl's worker registers it from the recipe's file,
    with a 6-token reply cap and the hub ``hub_name``. Returns (config, entry)."""
    from baselines.verl.train import prepare_config

    config = compose_recipe(
        "collab_bench_grpo",
        model,
        data_dir,
        [
            "data.train_batch_size=4",
            "actor_rollout_ref.rollout.n=2",
            "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            "data.dataloader_num_workers=0",
            "algorithm.rollout_correction.bypass_mode=true",
            *overrides,
        ],
    )
    prepare_config(config)
    OmegaConf.resolve(config)
    entry = OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path)[0]
    entry.update(max_tokens=6, hub_name=hub_name, hub_timeout_s=120)
    return config, entry


def cpu_trainer(config: Any, policy: Policy) -> Any:
    """A CollabBenchTrainer as verl's ``init`` builds it (its real ``__init__`` and dataloaders),
    the GPU parts left out: no worker groups, no rollout servers (the agent loops are served by
    ``policy`` through :class:`CPUAgentLoopManagerTQ`), no reward workers (the loop scores)."""
    from baselines.verl.trainer import CollabBenchTrainer

    t = CollabBenchTrainer(config)
    t.tokenizer, t.processor = policy.tokenizer, None
    t._init_dataloader()
    t._init_dump_executor()
    t.agent_loop_manager = CPUAgentLoopManagerTQ(config, CPUServerManager(policy), policy.tokenizer)
    t.reward_loop_manager = types.SimpleNamespace(reward_loop_worker_handles=[])
    t.resource_pool_manager = types.SimpleNamespace(get_n_gpus=lambda: 1)
    t.global_steps = 0
    return t
