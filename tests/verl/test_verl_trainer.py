"""CollabBenchTrainer on verl's V1 data path: TransferQueue, the replay buffer, verl's own
agent-loop worker, validation, advantages and step metrics, all on CPU.

The trainer is built from the recipe's composed config (its real ``__init__``, its real
dataloaders on make_data's files); only the GPU parts are absent: the rollout server is the
torch policy of the tiny model (verl_harness.CPUServerManager), old logprobs are the rollout's
(verl's ``rollout_correction.bypass_mode``), and nothing is updated.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
import transfer_queue as tq
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
from verl_harness import cpu_trainer, recipe_trainer_config

from baselines.verl.hub import ray_hub
from baselines.verl.make_data import main as make_data
from baselines.verl.metrics import INDEX_KEY, KL_LOSS_KEY, PPO_KL_KEY
from baselines.verl.trainer import collab_metrics
from benchmark.metrics.episode import episode_metrics

N = 2  # rollout.n
HUB = "test_trainer_hub"
TRAIN_SEEDS, VAL_SEEDS = (0, 1), (5, 6)


@pytest.fixture(scope="module")
def hub(ray_local: Any) -> Any:
    """The agent loops' hub, made first so that it keeps the traces."""
    return ray_hub(f"{HUB}_0", 120.0, keep_traces=True)


@pytest.fixture(scope="module")
def trainer(
    short_task: str,
    tiny_model: Path,
    tiny_policy: Any,
    transfer_queue: None,
    hub: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    """The trainer on teams of 1 and 2 agents of the short task (a training batch of 4 rows:
    two 1-agent episodes and one 2-agent episode), its agent loops registered from the recipe's
    agent-loop file as verl's worker does, with a 6-token reply cap."""
    data = tmp_path_factory.mktemp("data")
    train, val = (",".join(map(str, seeds)) for seeds in (TRAIN_SEEDS, VAL_SEEDS))
    argv = ["--out", str(data), "--tasks", short_task, "--n-agents", "1,2", "--batch-size", "4"]
    assert make_data([*argv, "--train-seeds", train, "--val-seeds", val]) == 0
    ckpt = tmp_path_factory.mktemp("ckpt")
    overrides = [f"trainer.default_local_dir={ckpt}"]
    config, entry = recipe_trainer_config(tiny_model, data, HUB, overrides)
    assert config.actor_rollout_ref.rollout.n == N
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(_agent_loop_registry, entry.name, entry)
        t = cpu_trainer(config, tiny_policy)
        yield t
        t.agent_loop_manager.close()


def _traces(hub: Any, seeds: tuple[int, ...]) -> list[dict[str, Any]]:
    """The kept traces of the hub's finished copies of ``seeds``."""
    traces = ray.get(hub.__ray_call__.remote(lambda h: list(h.traces.values())))
    return [tr for tr in traces if tr["config"]["seed"] in seeds]


def test_it_runs_as_verls_sync_trainer(trainer: Any) -> None:
    assert trainer.trainer_mode == "sync" and trainer.config.trainer.v1.trainer_mode == "sync"
    assert type(trainer.replay_buffer) is ReplayBuffer  # the async modes get another buffer
    assert trainer.config.data.gen_batch_size is None  # async modes fetch one prompt at a time


def test_validation_adds_the_collaboration_metrics(trainer: Any, hub: Any) -> None:
    """Each episode copy counts once: with teams of 1 and 2 agents, the means over copies
    differ from verl's own means over rows (a 2-agent episode has two rows)."""
    metrics = trainer._validate()
    traces = _traces(hub, VAL_SEEDS)
    assert len(traces) == 2 * len(VAL_SEEDS) == metrics["eval/episodes"]
    rows = [tr["config"]["n_agents"] for tr in traces]
    for key in ("task/SR", "task/TR", "task/L", "task/L_decisions", "comm/messages"):
        ours = [episode_metrics(tr)[key.split("/", 1)[1]] for tr in traces]
        assert metrics[f"eval/{key}"] == pytest.approx(np.mean(ours)), key
        per_row = np.average(ours, weights=rows)
        assert metrics[f"val-aux/collab_bench/{key}/mean@1"] == pytest.approx(per_row), key
    decisions = [episode_metrics(tr)["L_decisions"] for tr in traces]
    assert np.mean(decisions) != pytest.approx(np.average(decisions, weights=rows))
    assert trainer.last_eval[INDEX_KEY] == metrics[INDEX_KEY]
    assert "sample" not in vars(trainer.replay_buffer)  # the buffer's own method again


def test_a_training_step_logs_the_collaboration_metrics(trainer: Any, hub: Any) -> None:
    """One step's batch through verl's V1 functions: rollout into TransferQueue, the replay
    buffer, padding rows, old logprobs, GRPO advantages, then the step metrics."""
    t = trainer
    t.global_steps = 1
    t._add_batch_to_generate()
    batch, _ = t.replay_buffer.sample(global_steps=1, partition_id="train", batch_size=4)
    assert len(batch) == 4 * N  # rows x rollout.n
    batch = upsample_batch_to_divisible_size(batch, 3 * N, t.tokenizer.eos_token_id)
    assert sum(bool(tag.get("is_padding")) for tag in batch.tags) == 3 * N - (4 * N) % (3 * N)
    metrics: dict[str, Any] = {}
    batch = t._compute_old_log_prob(batch, metrics)
    batch = t._compute_advantage(batch, metrics)
    t._compute_metrics(batch, metrics, {"step": 1.0, "gen": 0.5}, global_steps=1, epoch=0)
    traces = _traces(hub, TRAIN_SEEDS)  # the batch: 1-agent seeds 0 and 1, 2-agent seed 0
    assert sorted(tr["config"]["n_agents"] for tr in traces) == [1] * 2 * N + [2] * N
    assert len(traces) == metrics["charts/episodes"]
    for key in ("task/SR", "task/TR", "task/L_decisions", "collab/B", "comm/messages"):
        values = [episode_metrics(tr)[key.split("/", 1)[1]] for tr in traces]
        finite = [v for v in values if v is not None and not np.isnan(v)]
        assert metrics[key] == pytest.approx(np.mean(finite)), key
    decisions = sum(episode_metrics(tr)["L_decisions"] for tr in traces)
    messages = sum(episode_metrics(tr)["messages"] for tr in traces)
    assert metrics["comm/messages_per_decision"] == pytest.approx(messages / decisions)
    # verl's own metrics of the same batch are there too, the padding rows left out.
    for key in ("critic/score/mean", "critic/advantages/mean", "response_length/mean"):
        assert key in metrics, key
    assert metrics["training/num_turns/min"] >= 2  # every real row played a decision
    tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)


@pytest.mark.parametrize(("use_kl_loss", "key"), [(True, KL_LOSS_KEY), (False, PPO_KL_KEY)])
def test_without_the_guard_a_step_logs_what_it_would_judge_and_goes_on(
    trainer: Any, monkeypatch: pytest.MonkeyPatch, use_kl_loss: bool, key: str
) -> None:
    """guard/kl is the KL the guard would judge, guard/index the last held-out TR; however
    large the KL, nothing is restored (the trainer has no worker group to restore into)."""
    assert trainer.guard is None
    monkeypatch.setitem(trainer.config.actor_rollout_ref.actor, "use_kl_loss", use_kl_loss)
    monkeypatch.setattr(trainer, "last_eval", {INDEX_KEY: 0.5})
    step_metrics = {KL_LOSS_KEY: 0.01, PPO_KL_KEY: 0.02, key: 5.0}
    monkeypatch.setattr(PPOTrainer, "step", lambda self, m, t: m.update(step_metrics) or "batch")
    metrics: dict[str, Any] = {}
    assert trainer.step(metrics, {}) == "batch"
    assert metrics["guard/kl"] == 5.0 and metrics["guard/index"] == 0.5
    assert "guard/action" not in metrics and "guard/rollbacks" not in metrics


def test_samples_of_another_agent_loop_are_refused_by_name() -> None:
    fields = [{"turn_scores": [], "tool_rewards": [], "min_global_steps": 1}]
    with pytest.raises(ValueError, match=r"lack \['episode_id', 'reward_extra_info'\]"):
        collab_metrics(fields)
