"""The KL guard's settings, logged values and saved state on verl's side.

The decisions are the CPU trainer's (:class:`baselines.rl.core.guard.KLGuard`); the trainer
(:mod:`.trainer`) feeds them and carries them out. Here:

* :func:`guard_settings`: ``collab_bench.guard`` of the recipe
  (``config/recipe/collab_bench.yaml``), the fields of
  :class:`~baselines.rl.core.guard.GuardSettings` validated by it, and the verl keys a guarded run
  needs (periodic checkpoints kept on disk, written synchronously, FSDP engines whose
  learning rates :mod:`.workers` can change);
* :func:`decision_metrics`: a decision as verl step metrics (``guard/*``);
* :func:`write_state` / :func:`read_state`: the guard's bookkeeping in a small JSON file inside
  each verl checkpoint folder (``global_step_N/collab_bench_guard.json``), so that a run
  resumed from that checkpoint keeps its rollbacks, its reference evaluations and its lowered
  learning rate.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from verl.trainer.ppo.utils import need_critic

from baselines.rl.core.checks import ConfigError
from baselines.rl.core.guard import Decision, GuardSettings, KLGuard

SECTION = "collab_bench.guard"
STATE_FILE = "collab_bench_guard.json"  # in verl's global_step_N folder
ACTIONS = ("pass", "rollback", "stop")  # guard/action logs the index
LR_STRATEGIES = ("fsdp", "fsdp2")  # engines whose optimiser set_actor_lr / set_critic_lr change


def guard_settings(config: DictConfig) -> GuardSettings:
    """The validated ``collab_bench.guard`` settings of verl's trainer ``config`` (the
    defaults, off, when the section is absent). Raises ConfigError naming the key for a value
    GuardSettings refuses or an unknown key, and ValueError naming the verl key when the guard
    is on and verl is set up so that a rollback could not work."""
    section = OmegaConf.select(config, SECTION)
    values = {} if section is None else OmegaConf.to_container(section, resolve=True)
    names = [f.name for f in dataclasses.fields(GuardSettings)]
    for key, value in values.items():
        if key not in names:
            raise ConfigError(f"{SECTION}.{key}", value, f"is not a guard setting; valid: {names}")
    try:
        settings = GuardSettings(**values)
    except ConfigError as err:
        raise err.within(SECTION) from None
    if settings.enabled:
        _check_verl(config)
    return settings


def _check_verl(config: DictConfig) -> None:
    """The verl settings a rollback relies on."""
    trainer = config.trainer
    actor = config.actor_rollout_ref.actor
    on = f"{SECTION}.enabled=true"
    if not trainer.save_freq or trainer.save_freq <= 0:
        raise ValueError(
            f"{on} needs trainer.save_freq > 0 (got {trainer.save_freq}): a rollback restores "
            "the last checkpoint that passed"
        )
    if trainer.get("del_local_ckpt_after_load", False):
        raise ValueError(
            f"{on} needs trainer.del_local_ckpt_after_load=false: the resumed checkpoint is the "
            "one a rollback may restore"
        )
    checkpoint = actor.get("checkpoint", {})
    if checkpoint.get("async_save", False):
        raise ValueError(
            f"{on} needs actor_rollout_ref.actor.checkpoint.async_save=false: a rollback may "
            "restore a checkpoint right after it is written"
        )
    for key in ("save_contents", "load_contents"):
        contents = list(checkpoint.get(key, ["model"]))
        if "model" not in contents:
            raise ValueError(
                f"{on} needs 'model' in actor_rollout_ref.actor.checkpoint.{key} (got {contents})"
            )
    if actor.strategy not in LR_STRATEGIES:
        raise ValueError(
            f"{on}: actor_rollout_ref.actor.strategy={actor.strategy!r}; lowering the learning "
            f"rate on a rollback is implemented for {list(LR_STRATEGIES)} "
            "(baselines/verl/workers.py)"
        )
    if config.critic.strategy not in LR_STRATEGIES and need_critic(config):
        raise ValueError(
            f"{on}: critic.strategy={config.critic.strategy!r}; lowering the critic's learning "
            f"rate on a rollback is implemented for {list(LR_STRATEGIES)} "
            "(baselines/verl/workers.py)"
        )


def decision_metrics(decision: Decision) -> dict[str, float]:
    """``decision`` as step metrics: ``guard/action`` (0 pass, 1 rollback, 2 stop),
    ``guard/rollbacks`` (so far), ``guard/lr`` (the actor's base learning rate from now on) and
    the measurement judged, ``guard/kl`` (nats per token) or ``guard/index`` (held-out TR)."""
    out = {
        "guard/action": float(ACTIONS.index(decision.action)),
        "guard/rollbacks": float(decision.rollbacks),
        "guard/lr": decision.lr,
    }
    if decision.kl is not None:
        out["guard/kl"] = decision.kl
    if decision.index is not None:
        out["guard/index"] = decision.index
    return out


def write_state(folder: str | Path, guard: KLGuard, step: int) -> Path:
    """Write ``guard``'s bookkeeping as saved with the checkpoint of global step ``step`` into
    ``folder`` (that checkpoint's ``global_step_N``); returns the file."""
    path = Path(folder) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "step": step,
        "settings": dataclasses.asdict(guard.settings),
        "state": guard.state_dict(),
    }
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def read_state(folder: str | Path) -> dict[str, Any] | None:
    """The guard's bookkeeping saved in checkpoint ``folder`` (``KLGuard.state_dict``), or
    None when the checkpoint was saved without the guard."""
    path = Path(folder) / STATE_FILE
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text())["state"]
        missing = [k for k in ("lr", "good_step", "rollbacks", "best", "last") if k not in state]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a guard state file ({err!r})") from None
    if missing:
        raise ValueError(f"{path}: the guard state lacks {missing}")
    return state
