"""Train LLM teams on CollabBench with verl: ``python -m baselines.verl.train [overrides]``.

    python -m baselines.verl.train actor_rollout_ref.model.path=/models/SmolLM2-135M-Instruct \\
        data.train_files=data/cb/train.parquet data.val_files=data/cb/val.parquet
    python -m baselines.verl.train --config-name collab_bench_ppo ...   # PPO with a critic

The config is verl's ``ppo_trainer`` with the recipe on top (``config/collab_bench_grpo.yaml``,
``config/collab_bench_ppo.yaml``); any verl key can be overridden. Before anything starts,
:func:`prepare_config` fills in the agent-loop file, makes the launch-relative paths absolute
(verl's Ray actors may run elsewhere) and checks that every batch holds whole episodes. Then,
as verl's own ``main_ppo`` does, the config is validated and ``run_ppo`` starts the
``TaskRunnerV1`` Ray actor. Ours first imports :mod:`.trainer`, which registers
``collab_bench_sync`` in that actor's process, the one where verl looks the trainer up
(``trainer.v1.trainer_mode``).
"""

from __future__ import annotations

from pathlib import Path

import hydra
import ray
from omegaconf import DictConfig, ListConfig
from verl.trainer.main_ppo import TaskRunnerV1, run_ppo
from verl.trainer.ppo.utils import need_critic, need_reference_policy
from verl.utils.config import validate_config
from verl.utils.device import auto_set_device

from baselines.verl.guard import guard_settings
from baselines.verl.make_data import read_rows
from baselines.verl.rows import check_batches
from baselines.verl.trainer import TRAINER_NAME

HERE = Path(__file__).resolve().parent
AGENT_LOOPS = HERE / "agent_loops.yaml"
CONFIG_DIR = HERE / "config"


class _TaskRunner(TaskRunnerV1.__ray_actor_class__):  # verl's own unwrap of its Ray actor class
    """verl's ``TaskRunnerV1``, registering CollabBench's trainer in its own process first."""

    def run(self, config: DictConfig) -> None:
        # Registers collab_bench_sync in this actor's process. Run as ``python -m``, this class
        # belongs to __main__ and reaches the actor pickled by value, without this module's
        # imports, so the import has to happen here.
        import baselines.verl.trainer  # noqa: F401

        return super().run(config)


CollabBenchTaskRunner = ray.remote(_TaskRunner)


def _absolute(value: str) -> str:
    return str(Path(value).expanduser().absolute())


def prepare_config(config: DictConfig) -> DictConfig:
    """Check and complete ``config`` (verl's trainer config) in place; returns it.

    Fills ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` with ``agent_loops.yaml``
    when it is null, makes ``data.train_files``, ``data.val_files`` and
    ``trainer.default_local_dir`` absolute, and raises ValueError naming the key when the run
    is not a V1 ``collab_bench_sync`` run, when ``data.shuffle`` is on, when a batch of
    ``data.train_batch_size`` (or ``data.val_batch_size``) rows would split an episode, or when
    the KL guard's settings (``collab_bench.guard``, :func:`~.guard.guard_settings`) are invalid
    or the guard is on with verl settings a rollback cannot work with.
    """
    trainer = config.trainer
    if not trainer.use_v1:
        raise ValueError("trainer.use_v1=false: the collab_bench trainer is a verl V1 trainer")
    if trainer.v1.trainer_mode != TRAINER_NAME:
        raise ValueError(
            f"trainer.v1.trainer_mode={trainer.v1.trainer_mode!r}: this launcher runs "
            f"{TRAINER_NAME!r} (verl's sync trainer with CollabBench's metrics)"
        )
    agent = config.actor_rollout_ref.rollout.agent
    if agent.agent_loop_config_path is None:
        agent.agent_loop_config_path = str(AGENT_LOOPS)
    agent.agent_loop_config_path = _absolute(agent.agent_loop_config_path)
    if not Path(agent.agent_loop_config_path).is_file():
        raise ValueError(
            "actor_rollout_ref.rollout.agent.agent_loop_config_path="
            f"{agent.agent_loop_config_path}: no such file"
        )
    data = config.data
    if data.shuffle:
        raise ValueError(
            "data.shuffle=true scatters an episode's agent rows over batches: use "
            "data.shuffle=false"
        )
    for key, size_key in (("train_files", "train_batch_size"), ("val_files", "val_batch_size")):
        files = data[key]
        paths = list(files) if isinstance(files, ListConfig | list) else [files]
        paths = [_absolute(str(p)) for p in paths]
        data[key] = paths if isinstance(files, ListConfig | list) else paths[0]
        size = data.get(size_key)
        for path in paths:
            if not Path(path).is_file():
                raise ValueError(
                    f"data.{key}: no file {path} (write it with python -m baselines.verl.make_data)"
                )
            if size:
                try:
                    check_batches(read_rows(path), int(size))
                except ValueError as err:
                    raise ValueError(f"data.{size_key}={size} with {path}: {err}") from err
    trainer.default_local_dir = _absolute(str(trainer.default_local_dir))
    guard_settings(config)
    return config


@hydra.main(config_path="config", config_name="collab_bench_grpo", version_base=None)
def main(config: DictConfig) -> None:
    """Prepare and validate ``config``, then train (verl's ``run_ppo`` with our task runner)."""
    prepare_config(config)
    auto_set_device(config)
    validate_config(
        config=config,
        use_reference_policy=need_reference_policy(config),
        use_critic=need_critic(config),
    )
    run_ppo(config, task_runner_class=CollabBenchTaskRunner)


if __name__ == "__main__":
    main()
