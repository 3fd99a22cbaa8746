"""The KL guard in CollabBenchTrainer: the real KLGuard on verl's real trainer object, its real
``fit`` loop, checkpoint save and resume code and validation, on CPU.

The trainer is built as test_verl_trainer builds it (verl_harness.cpu_trainer). The stand-ins
are for what exists only on GPUs, each named as one:

* :class:`StandInActorGroup` for verl's actor worker group (FSDP workers in Ray actors), and
  :class:`StandInCriticGroup` for the critic's;
* :class:`StandInReplicas` for verl's CheckpointEngineManager (vLLM replicas put to sleep and
  woken with the actor's weights);
* a scripted update (:func:`scripted_updates`) for verl's ``step`` (rollout, old and reference
  log-probs, advantages and the actor update on those workers), reporting a given
  ``actor/kl_loss``.
"""

from __future__ import annotations

import json
import os
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
import torch
import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.single_controller.base.decorator import MAGIC_ATTR, Dispatch
from verl.single_controller.ray.base import RayClassWithInitArgs, create_colocated_worker_cls
from verl.trainer.ppo.utils import Role
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
from verl.utils.torch_functional import get_constant_schedule_with_warmup
from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker
from verl_harness import cpu_trainer, recipe_trainer_config

from baselines.rl.core.checks import ConfigError
from baselines.verl.guard import STATE_FILE, read_state
from baselines.verl.make_data import main as make_data
from baselines.verl.metrics import INDEX_KEY, KL_LOSS_KEY
from baselines.verl.train import prepare_config
from baselines.verl.workers import CollabBenchActorWorker, CollabBenchCriticWorker, set_base_lr

HUB = "test_guard_hub"
LR = 1e-3  # the actor's learning rate in these tests
CRITIC_LR = 4e-3  # the critic's, where there is one
WARMUP = 2  # the stand-in engine's warmup steps (verl's constant schedule with warmup)


# ---------------------------------------------------------------------- the worker's call
def _engine(lr: float = LR) -> types.SimpleNamespace:
    """A torch linear layer with AdamW under verl's own warmup schedule, as verl's FSDP engine
    holds its ``module``, ``optimizer`` and ``lr_scheduler``."""
    torch.manual_seed(0)
    module = torch.nn.Linear(4, 1)
    optimizer = torch.optim.AdamW(module.parameters(), lr=lr)
    scheduler = get_constant_schedule_with_warmup(optimizer, num_warmup_steps=WARMUP)
    return types.SimpleNamespace(module=module, optimizer=optimizer, lr_scheduler=scheduler)


def _update(engine: types.SimpleNamespace) -> None:
    """One optimiser step and one schedule step, as verl's actor update ends."""
    engine.optimizer.zero_grad()
    engine.module(torch.ones(2, 4)).pow(2).sum().backward()
    engine.optimizer.step()
    engine.lr_scheduler.step()


def test_a_lowered_base_rate_keeps_the_schedule_and_travels_in_its_state() -> None:
    e = _engine()
    _update(e)  # warmup step 1 of 2: half the base rate
    assert e.optimizer.param_groups[0]["lr"] == pytest.approx(LR / 2)
    assert set_base_lr(e.optimizer, e.lr_scheduler, LR / 4) == [pytest.approx(LR / 8)]
    _update(e)  # warmup done: the whole (lowered) base rate from now on
    _update(e)
    assert e.optimizer.param_groups[0]["lr"] == pytest.approx(LR / 4)
    # verl's checkpoint holds both state dicts; a resumed engine, built at the config's rate,
    # goes on at the lowered one.
    fresh = _engine()
    fresh.optimizer.load_state_dict(e.optimizer.state_dict())
    fresh.lr_scheduler.load_state_dict(e.lr_scheduler.state_dict())
    _update(fresh)
    assert fresh.optimizer.param_groups[0]["lr"] == pytest.approx(LR / 4)
    with pytest.raises(TypeError, match="a torch optimizer is needed"):
        set_base_lr(types.SimpleNamespace(param_groups=[]), None, LR)


def test_the_worker_call_reaches_every_rank_of_verls_colocated_worker() -> None:
    """``set_actor_lr`` is registered as verl's own calls are (sent to every rank) and verl's
    colocated worker class binds it under the role's prefix, as the trainer's worker group
    calls it; on a worker it sets the actor engine's rate."""
    method = CollabBenchActorWorker.set_actor_lr
    assert getattr(method, MAGIC_ATTR)["dispatch_mode"] == Dispatch.ONE_TO_ALL
    role = str(Role.ActorRolloutRef)
    cls = RayClassWithInitArgs(cls=ray.remote(CollabBenchActorWorker), config=None, role=role)
    colocated = create_colocated_worker_cls({role: cls}).cls.__ray_actor_class__
    assert hasattr(colocated, f"{role}_set_actor_lr") and hasattr(colocated, f"{role}_update_actor")
    e = _engine()
    worker = types.SimpleNamespace(role=role, actor=types.SimpleNamespace(engine=e))
    assert method(worker, lr=LR / 2) == [pytest.approx(0.0)]  # warmup step 0: factor 0
    assert e.lr_scheduler.base_lrs == [LR / 2]
    with pytest.raises(RuntimeError, match="role 'ref' has no actor"):
        method(types.SimpleNamespace(role="ref"), lr=LR)


def test_the_critic_call_reaches_every_rank_and_sets_the_critic_engines_rate() -> None:
    method = CollabBenchCriticWorker.set_critic_lr
    assert getattr(method, MAGIC_ATTR)["dispatch_mode"] == Dispatch.ONE_TO_ALL
    role = str(Role.Critic)
    cls = RayClassWithInitArgs(cls=ray.remote(CollabBenchCriticWorker), config=None)
    colocated = create_colocated_worker_cls({role: cls}).cls.__ray_actor_class__
    assert hasattr(colocated, f"{role}_set_critic_lr") and hasattr(colocated, f"{role}_train_batch")
    e = _engine(CRITIC_LR)
    _update(e)
    _update(e)  # warmup done
    assert method(types.SimpleNamespace(engine=e), lr=CRITIC_LR / 2) == [CRITIC_LR / 2]
    assert e.lr_scheduler.base_lrs == [CRITIC_LR / 2]


# ---------------------------------------------------------------------- stand-ins
class StandInEngineGroup:
    """A stand-in ONLY for a verl worker group of FSDP workers in Ray actors on GPUs: one CPU
    engine (:func:`_engine`) that saves and loads its weights, optimiser and schedule as torch
    files in the folder verl names. Calls are recorded."""

    def __init__(self, lr: float) -> None:
        self.engine = _engine(lr)
        self.calls: list[tuple[str, Any]] = []

    def weights(self) -> torch.Tensor:
        return self.engine.module.weight.detach().clone()

    def lr(self) -> float:
        return float(self.engine.optimizer.param_groups[0]["lr"])

    def save_checkpoint(
        self,
        local_path: str,
        hdfs_path: Any = None,
        global_step: int = 0,
        max_ckpt_to_keep: Any = None,
    ) -> None:
        self.calls.append(("save", local_path))
        os.makedirs(local_path, exist_ok=True)
        e = self.engine
        state = {
            "model": e.module.state_dict(),
            "optimizer": e.optimizer.state_dict(),
            "lr_scheduler": e.lr_scheduler.state_dict(),
        }
        torch.save(state, os.path.join(local_path, "engine.pt"))

    def load_checkpoint(
        self, local_path: str, hdfs_path: Any = None, del_local_after_load: bool = False
    ) -> None:
        self.calls.append(("load", local_path))
        state = torch.load(os.path.join(local_path, "engine.pt"))
        self.engine.module.load_state_dict(state["model"])
        self.engine.optimizer.load_state_dict(state["optimizer"])
        self.engine.lr_scheduler.load_state_dict(state["lr_scheduler"])

    def called(self, name: str) -> list[Any]:
        return [arg for call, arg in self.calls if call == name]


class StandInActorGroup(StandInEngineGroup):
    """The stand-in for the actor's group: ``set_actor_lr`` runs CollabBenchActorWorker's own
    method on the engine, as verl's one rank would."""

    def __init__(self) -> None:
        super().__init__(LR)
        actor = types.SimpleNamespace(engine=self.engine)
        self.worker = types.SimpleNamespace(role=str(Role.ActorRolloutRef), actor=actor)

    def set_actor_lr(self, lr: float) -> list[list[float]]:
        self.calls.append(("set_actor_lr", lr))
        return [CollabBenchActorWorker.set_actor_lr(self.worker, lr=lr)]


class StandInCriticGroup(StandInEngineGroup):
    """The stand-in for the critic's group (verl's ``TrainingWorker`` of the value model):
    ``set_critic_lr`` runs CollabBenchCriticWorker's own method on the engine."""

    def __init__(self) -> None:
        super().__init__(CRITIC_LR)
        self.worker = types.SimpleNamespace(engine=self.engine)

    def set_critic_lr(self, lr: float) -> list[list[float]]:
        self.calls.append(("set_critic_lr", lr))
        return [CollabBenchCriticWorker.set_critic_lr(self.worker, lr=lr)]


class StandInReplicas:
    """A stand-in ONLY for verl's CheckpointEngineManager, which puts the vLLM replicas on the
    GPUs to sleep and wakes them with the actor's weights: it records the calls, each wake-up
    with the weights it would send."""

    def __init__(self, actor: StandInActorGroup) -> None:
        self.actor = actor
        self.calls: list[Any] = []

    def sleep_replicas(self) -> None:
        self.calls.append("sleep")

    def update_weights(self, global_steps: int | None = None) -> None:
        self.calls.append(("update_weights", global_steps, self.actor.weights()))


def scripted_updates(monkeypatch: pytest.MonkeyPatch, kls: dict[int, float]) -> list[int]:
    """Replace verl's ``step`` (rollout, log-probs, advantages, actor update: GPU workers) by an
    update of the stand-in engines (the critic's too, if any) that reports
    ``actor/kl_loss = kls[step]``, and verl's metrics
    of the step's batch (read from TransferQueue) by none: the batch is empty. Returns the
    steps updated, in order."""
    steps: list[int] = []

    def step(self: Any, metrics: dict[str, Any], timing_raw: dict[str, float]) -> KVBatchMeta:
        steps.append(self.global_steps)
        _update(self.actor_rollout_wg.engine)
        if self.use_critic:
            _update(self.critic_wg.engine)
        metrics.update({KL_LOSS_KEY: kls[self.global_steps], "actor/pg_loss": 0.0})
        return KVBatchMeta(partition_id="train", keys=[], tags=[])

    monkeypatch.setattr(PPOTrainer, "step", step)
    monkeypatch.setattr(PPOTrainer, "_compute_metrics", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(tq, "kv_clear", lambda keys, partition_id: None)
    return steps


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def data(short_task: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("data")
    argv = ["--out", str(out), "--tasks", short_task, "--n-agents", "1,2", "--batch-size", "4"]
    assert make_data([*argv, "--train-seeds", "0,1", "--val-seeds", "5"]) == 0
    return out


GUARDED = [
    "collab_bench.guard.enabled=true",
    f"actor_rollout_ref.actor.optim.lr={LR}",
    "trainer.total_epochs=100",  # the 6 training rows make one step per epoch
    "trainer.val_before_train=false",
]


@pytest.fixture
def make_trainer(
    data: Path, tiny_model: Path, tiny_policy: Any, transfer_queue: None, tmp_path: Path
) -> Iterator[Callable[..., Any]]:
    """Builds guarded trainers checkpointing to ``tmp_path/ckpt``, with the stand-ins, and
    their agent loops registered for verl's worker."""
    made: list[Any] = []
    with pytest.MonkeyPatch.context() as patch:

        def make(*overrides: str) -> Any:
            keys = {o.split("=")[0] for o in overrides}
            base = [o for o in GUARDED if o.split("=")[0] not in keys]
            ckpt = f"trainer.default_local_dir={tmp_path / 'ckpt'}"
            config, entry = recipe_trainer_config(tiny_model, data, HUB, [*base, ckpt, *overrides])
            patch.setitem(_agent_loop_registry, entry.name, entry)
            t = cpu_trainer(config, tiny_policy)
            t.actor_rollout_wg = StandInActorGroup()
            if t.use_critic:
                t.critic_wg = StandInCriticGroup()
            t.checkpoint_manager = StandInReplicas(t.actor_rollout_wg)
            made.append(t)
            return t

        yield make
    for t in made:
        t.agent_loop_manager.close()


def _saved(t: Any, step: int, role: str = "actor") -> torch.Tensor:
    """The actor's (or ``role``'s) weights in the checkpoint of ``step``."""
    path = Path(_actor_folder(t, step, role)) / "engine.pt"
    return torch.load(path)["model"]["weight"]


def _actor_folder(t: Any, step: int, role: str = "actor") -> str:
    return os.path.join(t.config.trainer.default_local_dir, f"global_step_{step}", role)


# ---------------------------------------------------------------------- the guard in fit
def test_fit_rolls_back_on_kl_then_stops_when_rollbacks_are_spent_and_a_restart_keeps_count(
    make_trainer: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """verl's fit with checkpoints every 2 steps, max_rollbacks=1. Step 3's KL fails: the
    checkpoint of step 2 comes back at half the learning rate and is saved as step 3. Step 6's
    KL fails with the rollback spent: step 4's checkpoint (not step 5's weights, not step 6's)
    comes back, is saved as step 6, and training ends after step 6 of 8. A restarted run
    resumes at step 6 with the count and the rate, so its first failure stops at once."""
    log = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(log))
    overrides = [
        "collab_bench.guard.max_rollbacks=1",
        "trainer.save_freq=2",
        "trainer.test_freq=-1",
        "trainer.total_training_steps=8",
        "trainer.logger=[file]",
    ]
    t = make_trainer(*overrides)
    kls = {1: 0.01, 2: 0.01, 3: 0.05, 4: 0.01, 5: 0.01, 6: 0.3, 7: 0.01, 8: 0.01}
    updated = scripted_updates(monkeypatch, kls)
    actor, replicas = t.actor_rollout_wg, t.checkpoint_manager
    t._load_checkpoint()  # as verl's init does: a run from scratch saves its start as step 0
    assert read_state(Path(_actor_folder(t, 0)).parent)["good_step"] == 0

    t.fit(t.agent_loop_manager)

    assert updated == [1, 2, 3, 4, 5, 6] and t.guard_stop is not None
    assert actor.called("load") == [_actor_folder(t, 2), _actor_folder(t, 4)]
    assert actor.called("set_actor_lr") == [LR / 2, LR / 2]
    saves = [Path(p).parent.name for p in actor.called("save")]
    assert saves == [f"global_step_{s}" for s in (0, 2, 3, 4, 6)]
    assert torch.equal(_saved(t, 3), _saved(t, 2)) and torch.equal(_saved(t, 6), _saved(t, 4))
    assert torch.equal(actor.weights(), _saved(t, 4))
    assert not torch.equal(_saved(t, 4), _saved(t, 2))  # the updates did change the weights
    # The rollout servers get the restored weights at the end of steps 3 and 6.
    sent = {step: w for call, step, w in (c for c in replicas.calls if c != "sleep")}
    assert torch.equal(sent[3], _saved(t, 2)) and torch.equal(sent[6], _saved(t, 4))
    assert actor.lr() == pytest.approx(LR / 2)  # warmup is over: the lowered base rate
    folder = Path(t.config.trainer.default_local_dir)
    assert (folder / "latest_checkpointed_iteration.txt").read_text() == "6"
    state = json.loads((folder / "global_step_6" / STATE_FILE).read_text())["state"]
    assert state["rollbacks"] == 1 and state["good_step"] == 6 and state["lr"] == LR / 2
    # Every step's metrics in verl's own file logger carry the guard's values.
    rows = {r["step"]: r["data"] for r in map(json.loads, log.read_text().splitlines())}
    assert sorted(rows) == [1, 2, 3, 4, 5, 6]
    assert [rows[s]["guard/kl"] for s in rows] == [kls[s] for s in rows]
    assert [rows[s]["guard/action"] for s in rows] == [0, 0, 1, 0, 0, 2]
    assert [rows[s]["guard/rollbacks"] for s in rows] == [0, 0, 1, 1, 1, 1]
    assert [rows[s]["guard/lr"] for s in rows] == [LR] * 2 + [LR / 2] * 4
    out = capsys.readouterr().out
    assert "step 3: rollback: KL to the reference 0.05 > max_kl 0.02: restoring" in out
    assert "training stopped at step 6: KL to the reference 0.3 > max_kl 0.02; 1 rollbacks" in out

    again = make_trainer(*overrides)
    scripted_updates(monkeypatch, {7: 0.5})
    again._load_checkpoint()  # verl's resume from the newest checkpoint, then the guard's state
    assert again.global_steps == 6 and again.guard.state_dict() == t.guard.state_dict()
    assert again.actor_rollout_wg.called("set_actor_lr") == [LR / 2]
    assert torch.equal(again.actor_rollout_wg.weights(), _saved(t, 4))
    again.fit(again.agent_loop_manager)
    assert again.guard_stop is not None and again.guard.rollbacks == 1
    assert again.actor_rollout_wg.called("load") == [_actor_folder(t, 6)] * 2


CRITIC = [
    "algorithm.adv_estimator=gae",
    "critic.enable=true",
    f"critic.optim.lr={CRITIC_LR}",
    "critic.ppo_mini_batch_size=2",
]


def test_a_rollback_restores_the_critic_and_lowers_its_rate_by_the_actors_factor(
    make_trainer: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PPO with a critic, checkpoints every 2 steps: step 3's KL fails, so the critic's
    checkpoint of step 2 comes back with the actor's, and its base rate halves with the
    actor's; a restarted run sets both lowered rates again."""
    overrides = [*CRITIC, "trainer.save_freq=2", "trainer.test_freq=-1", "trainer.logger=[console]"]
    t = make_trainer(*overrides, "trainer.total_training_steps=4")
    assert t.use_critic
    scripted_updates(monkeypatch, {1: 0.01, 2: 0.01, 3: 0.05, 4: 0.01})
    t._load_checkpoint()
    t.fit(t.agent_loop_manager)

    critic = t.critic_wg
    role = str(Role.Critic)
    assert critic.called("load") == [_actor_folder(t, 2, role)]
    assert critic.called("set_critic_lr") == [CRITIC_LR / 2]
    assert t.actor_rollout_wg.called("set_actor_lr") == [LR / 2]
    assert torch.equal(_saved(t, 3, role), _saved(t, 2, role))
    assert not torch.equal(_saved(t, 4, role), _saved(t, 2, role))  # step 4 trained on
    assert critic.engine.lr_scheduler.base_lrs == [CRITIC_LR / 2]
    assert critic.engine.optimizer.param_groups[0]["lr"] == pytest.approx(CRITIC_LR / 2)

    again = make_trainer(*overrides, "trainer.total_training_steps=4")
    again._load_checkpoint()
    assert again.global_steps == 4
    assert again.critic_wg.called("set_critic_lr") == [CRITIC_LR / 2]
    assert again.critic_wg.engine.lr_scheduler.base_lrs == [CRITIC_LR / 2]


# ---------------------------------------------------------------------- the guard after validation
def test_a_validated_step_is_saved_after_it_passed_and_a_tr_drop_restores_the_last_that_did(
    make_trainer: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints every step, a validation every step (verl's own, on the CPU agent loops).
    Step 1's checkpoint waits for its validation, the first, which passes. Before step 2's
    validation the reference is raised to TR 1.0 (as if step 1's had satisfied every checklist
    atom): the tiny random policy's TR falls more than 0.1 below it, so step 1's checkpoint
    comes back, with the rollout servers asleep, and is saved as step 2: step 2's own weights,
    which failed, are never saved."""
    t = make_trainer("trainer.save_freq=1", "trainer.test_freq=1")
    scripted_updates(monkeypatch, {1: 0.01, 2: 0.01})
    actor, replicas = t.actor_rollout_wg, t.checkpoint_manager
    t._load_checkpoint()
    folder = Path(t.config.trainer.default_local_dir)

    t.global_steps = 1
    t.step({}, {})
    t._save_checkpoint()
    assert not (folder / "global_step_1").exists()  # held back for the validation
    metrics = t._validate()
    tr = metrics[INDEX_KEY]
    assert metrics["guard/action"] == 0 and metrics["guard/index"] == tr
    assert torch.equal(_saved(t, 1), actor.weights()) and t.guard.good_step == 1
    assert replicas.calls[0] == "sleep" and replicas.calls[1][:2] == ("update_weights", 1)

    t.guard.load_state_dict({**t.guard.state_dict(), "best": [1, 1.0]})
    t.global_steps = 2
    t.step({}, {})
    t._save_checkpoint()
    failing = actor.weights()
    replicas.calls.clear()
    metrics = t._validate()
    assert metrics[INDEX_KEY] == tr < 0.9  # the same weights' TR, far below the reference
    assert metrics["guard/action"] == 1 and metrics["guard/rollbacks"] == 1
    assert metrics["guard/lr"] == LR / 2 and metrics["guard/index"] == tr
    assert actor.called("load") == [_actor_folder(t, 1)]
    assert actor.called("set_actor_lr") == [LR / 2]
    assert torch.equal(_saved(t, 2), _saved(t, 1)) and not torch.equal(_saved(t, 2), failing)
    assert replicas.calls[0] == "sleep" and replicas.calls[1][:2] == ("update_weights", 2)
    assert torch.equal(replicas.calls[1][2], _saved(t, 1))
    assert read_state(folder / "global_step_2")["rollbacks"] == 1


# ---------------------------------------------------------------------- settings and wiring
def test_the_guarded_trainer_asks_verl_for_the_workers_with_the_lr_calls(
    make_trainer: Callable[..., Any],
) -> None:
    def worker(trainer: Any, role: Role) -> type:
        return trainer.role_worker_mapping[role].__ray_actor_class__

    t = make_trainer(*CRITIC)
    t._init_resource_pool_mgr()  # verl's resource mapping (no resources are taken)
    [role] = [r for r in t.role_worker_mapping if r in (Role.ActorRollout, Role.ActorRolloutRef)]
    assert worker(t, role) is CollabBenchActorWorker
    assert worker(t, Role.Critic) is CollabBenchCriticWorker
    unguarded = make_trainer(*CRITIC, "collab_bench.guard.enabled=false")
    unguarded._init_resource_pool_mgr()
    assert worker(unguarded, role) is ActorRolloutRefWorker
    assert worker(unguarded, Role.Critic) is TrainingWorker


def test_only_steps_that_updated_the_actor_are_judged_and_their_kl_must_be_there(
    make_trainer: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before ``trainer.critic_warmup`` verl does not update the actor: no KL, no decision.
    After it, an update that logged no KL is refused, naming the key."""
    t = make_trainer("trainer.critic_warmup=2")
    monkeypatch.setattr(PPOTrainer, "step", lambda self, m, t: m.update({"critic/vf_loss": 1.0}))
    t.global_steps = 1
    metrics: dict[str, Any] = {}
    t.step(metrics, {})
    assert "guard/action" not in metrics and t.guard.rollbacks == 0
    t.global_steps = 2
    with pytest.raises(RuntimeError, match="judges actor/kl_loss, which the update did not log"):
        t.step({}, {})


def test_a_missing_checkpoint_is_named(make_trainer: Callable[..., Any]) -> None:
    with pytest.raises(FileNotFoundError, match="no actor checkpoint of step 3"):
        make_trainer().restore_checkpoint(3)


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        (["collab_bench.guard.lr_factor=1.5"], ConfigError, r"guard.lr_factor=1.5 must be in"),
        (["collab_bench.guard.index_reference=mean"], ConfigError, "not one of"),
        (["+collab_bench.guard.max_drop=0.1"], ConfigError, "max_drop=0.1 is not a guard"),
        (["trainer.save_freq=-1"], ValueError, "needs trainer.save_freq > 0"),
        (["trainer.del_local_ckpt_after_load=true"], ValueError, "del_local_ckpt_after_load"),
        (["actor_rollout_ref.actor.checkpoint.async_save=true"], ValueError, "async_save=false"),
        (["actor_rollout_ref.actor.strategy=megatron"], ValueError, r"for \['fsdp', 'fsdp2'\]"),
        (["critic.enable=true", "critic.strategy=megatron"], ValueError, "critic.strategy="),
    ],
)
def test_guard_settings_are_checked_before_start(
    data: Path, tiny_model: Path, overrides: list[str], error: type, message: str
) -> None:
    from verl_harness import compose_recipe

    config = compose_recipe("collab_bench_grpo", tiny_model, data, [*GUARDED, *overrides])
    with pytest.raises(error, match=message):
        prepare_config(config)


@pytest.mark.parametrize(
    ("text", "message"),
    [("{not json", "not a guard state file"), ('{"step": 1}', "not a guard state file"),
     ('{"step": 1, "state": {"lr": 0.1}}', r"the guard state lacks \['good_step'")],
)  # fmt: skip
def test_a_damaged_guard_state_file_is_named(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / STATE_FILE).write_text(text)
    with pytest.raises(ValueError, match=message) as caught:
        read_state(tmp_path)
    assert str(tmp_path / STATE_FILE) in str(caught.value)
