"""The training loop shared by GRPO, PPO and SPPO.

Each step: play B seeds x G rollouts with the current weights (Ray actors or in-process), turn
the decisions into samples, update every policy on its samples (``baselines/rl/core/update.py``:
advantages, old and reference logprobs, ``ppo_epochs`` passes of minibatch updates), then sync
the weights to the generators. The algorithms differ only in the parts ``trainer.name`` looks
up in ``baselines/rl/core/algos.py``.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from baselines.rl.core.algos import ALGORITHMS
from baselines.rl.core.checkpoint import load_checkpoint, load_latest, save_checkpoint
from baselines.rl.core.config import RolloutSettings, TrainSettings, train_settings
from baselines.rl.core.guard import KLGuard
from baselines.rl.core.policy import LoraOptions, Policy, resolve_model_dir
from baselines.rl.core.rollout import EpisodeResult, EpisodeSpec
from baselines.rl.core.samples import Batch, Sample, collate, episode_samples
from baselines.rl.core.update import reference_kl, update_policy
from baselines.rl.core.workers import WorkerPool
from benchmark.runner.loggers import namespaced

REF_KL = "charts/ref_kl"  # KL(policy || reference) per generated token after the update (guard)


def episode_summary(results: list[EpisodeResult], prefix: str = "") -> dict[str, float]:
    """Means of the task, collaboration and communication metrics over episodes."""
    rows = [namespaced(r.metrics) for r in results]
    keys = sorted({k for row in rows for k in row})
    out = {}
    for k in keys:
        vals = [row[k] for row in rows if k in row]
        out[prefix + k] = sum(vals) / len(vals)
    return out


class Trainer:
    """One training run in ``output_dir`` (resumed from its latest checkpoint if any).

    ``cfg`` is validated (:func:`~baselines.rl.core.config.train_settings`) before anything is
    loaded or played."""

    def __init__(
        self,
        cfg: TrainSettings | DictConfig,
        output_dir: str | Path,
        log: Callable[[str], None] = print,
    ):
        cfg = train_settings(cfg)
        algo = cfg.trainer
        self.cfg = cfg
        self.algo = algo
        self.root = Path(output_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = log
        torch.manual_seed(cfg.seed)
        self.model_dir = str(resolve_model_dir(cfg.policy.init))
        self.lora = (
            LoraOptions(
                r=cfg.policy.lora_r,
                alpha=cfg.policy.lora_alpha,
                target_modules=cfg.policy.lora_targets,
                layers=cfg.policy.lora_layers,
            )
            if cfg.policy.lora
            else None
        )
        self.keys = (
            ["shared"]
            if cfg.policy.sharing == "shared"
            else [f"agent_{k}" for k in range(cfg.data.n_agents)]
        )
        self.policies: dict[str, Policy] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        for key in self.keys:
            policy = Policy(
                self.model_dir,
                value_head=ALGORITHMS[algo.name].value_head,
                lora=self.lora,
                device=cfg.policy.device,
                threads=cfg.threads,
            )
            if cfg.policy.adapter:
                from baselines.llm_support import resolve_adapter
                from benchmark.llm.adapters import load_trainable

                load_trainable(policy.model, resolve_adapter(cfg.policy.adapter), cfg.policy.init)
            if algo.kl_coef > 0 or cfg.guard.enabled:
                policy.freeze_reference()
            self.policies[key] = policy
            self.optimizers[key] = torch.optim.AdamW(
                list(policy.parameters()), lr=algo.lr, weight_decay=algo.weight_decay
            )
        self.options = cfg.rollout
        self.step = 0
        self.grad_norms: list[float] = []
        self.guard = KLGuard(cfg.guard, lr=algo.lr)
        self.saved_step: int | None = None  # the step of the newest checkpoint on disk
        # Under the guard: the newest checkpoint holds weights saved before their held-out
        # evaluation (a resume point; not yet passed), see :meth:`save`.
        self.pending_eval = False
        state = load_latest(self.root / "checkpoints") if cfg.resume else None
        if state is not None:
            self._load(state)
            self.step = self.saved_step = state["step"]
            self.pending_eval = bool(state.get("pending_eval", False))
            if "guard" in state:
                self.guard.load_state_dict(state["guard"])
            else:  # saved before the guard existed: the resumed weights are the start
                self.guard.lr = self.lr
                self.guard.checkpoint_saved(self.step)
            log(f"resumed from step {self.step}")
        self.pool = WorkerPool(
            cfg, self.policies, self.options, self.model_dir, self.lora, self.root
        )

    # ------------------------------------------------------------------ rollouts
    def sync_weights(self) -> None:
        """Send the trainer's weights to every generator."""
        self.pool.sync_weights()

    def play(
        self,
        specs: list[EpisodeSpec],
        keep_trace: bool = False,
        options: RolloutSettings | None = None,
    ) -> list[EpisodeResult]:
        """Play ``specs`` on the workers; results in spec order."""
        return self.pool.play(specs, keep_trace, options)

    def train_specs(self, step: int) -> list[EpisodeSpec]:
        """The episodes of ``step``: seeds_per_step seeds from the data position, G each."""
        d = self.cfg.data
        specs = []
        for j in range(d.seeds_per_step):
            pos = step * d.seeds_per_step + j
            seed = d.seed_start + pos % d.seed_count
            task = d.tasks[pos % len(d.tasks)]
            for g in range(d.group_size):
                specs.append(
                    EpisodeSpec(
                        task,
                        d.n_agents,
                        seed,
                        d.split,
                        gen_seed=hash((self.cfg.seed, step, j, g)) % 2**31,
                        group=j,
                        index=len(specs),
                    )
                )
        return specs

    def eval_specs(self) -> list[EpisodeSpec]:
        e, d = self.cfg.eval, self.cfg.data
        return [
            EpisodeSpec(
                d.tasks[k % len(d.tasks)],
                d.n_agents,
                e.seed_start + k,
                e.split,
                gen_seed=e.seed_start + k,
                index=k,
            )
            for k in range(e.episodes)
        ]

    def evaluate(self) -> dict[str, float]:
        """Held-out episodes with the evaluation temperature: the metrics' means, and
        ``eval/episodes`` (how many episodes the success rate is over, for its interval)."""
        self.sync_weights()
        options = dataclasses.replace(self.options, temperature=self.cfg.eval.temperature)
        results = self.play(self.eval_specs(), options=options)
        summary = episode_summary(results, "eval/")
        summary["eval/episodes"] = sum("task/SR" in namespaced(r.metrics) for r in results)
        return summary

    # ------------------------------------------------------------------ update
    def update(self, batch: Batch, key: str = "shared") -> dict[str, float]:
        """Advantages and ``ppo_epochs`` of minibatch updates of policy ``key`` on one batch
        (:func:`~baselines.rl.core.update.update_policy`); returns the update's statistics."""
        stats, norms = update_policy(
            self.policies[key],
            self.optimizers[key],
            batch,
            self.algo,
            order_seed=hash((self.cfg.seed, self.step)) % 2**31,
            grad_norm_history=self.grad_norms[-20:],
        )
        if norms:
            self.grad_norms = [*self.grad_norms[-99:], *norms]
        stats["charts/lr"] = self.optimizers[key].param_groups[0]["lr"]
        if self.cfg.guard.enabled:
            # The guard's measurement: two no-grad forward passes (policy and reference)
            # over the step's batch, after the update.
            stats[REF_KL] = reference_kl(self.policies[key], batch, self.algo.minibatch_size)
        return stats

    def update_samples(self, samples: list[Sample]) -> dict[str, float]:
        """Update every policy on its samples (all of them when the policy is shared); the
        statistics are averaged over policies."""
        pad = self.policy.tokenizer.pad_token_id
        if self.keys == ["shared"]:
            return self.update(collate(samples, pad))
        merged: dict[str, list[float]] = {}
        for key in self.keys:
            own = [s for s in samples if s.agent == key]
            if not own:
                continue
            for k, v in self.update(collate(own, pad), key).items():
                merged.setdefault(k, []).append(v)
        # The guard judges the policy furthest from its reference.
        return {k: max(v) if k == REF_KL else sum(v) / len(v) for k, v in merged.items()}

    @property
    def policy(self) -> Policy:
        """The (first) policy."""
        return self.policies[self.keys[0]]

    # ------------------------------------------------------------------ loop
    def train_step(self) -> dict[str, float]:
        """One rollout + update; returns the step's metrics."""
        start = time.perf_counter()
        self.sync_weights()
        results = self.play(self.train_specs(self.step))
        rollout_s = time.perf_counter() - start
        a = self.algo
        samples = [
            s
            for r in results
            for s in episode_samples(r, self.options.mode, a.return_mode, a.group_by, a.turn_gamma)
        ]
        played = len(samples)
        if 0 < a.max_samples < len(samples):
            # A CPU budget: a seeded uniform subsample of the decisions (advantages are then
            # computed within the subsample's groups).
            samples = random.Random(hash((self.cfg.seed, self.step)) % 2**31).sample(
                samples, a.max_samples
            )
        stats = self.update_samples(samples)
        stats["charts/samples_used"] = float(len(samples))
        returns = [v for r in results for v in r.returns.values()]
        gen_tokens = sum(r.gen_tokens for r in results)
        stats.update(episode_summary(results))
        stats.update(
            {
                "charts/return_mean": sum(returns) / len(returns),
                "charts/decisions": float(played)
                if self.options.mode == "per_step"
                else float(sum(len(ds) for r in results for ds in r.decisions.values())),
                "charts/gen_len": gen_tokens
                / max(1, sum(len(ds) for r in results for ds in r.decisions.values())),
                "perf/rollout_s": rollout_s,
                "perf/tokens_per_s": gen_tokens / max(rollout_s, 1e-9),
                "perf/step_s": time.perf_counter() - start,
            }
        )
        self.step += 1
        return stats

    @property
    def lr(self) -> float:
        """The optimisers' current learning rate."""
        return self.optimizers[self.keys[0]].param_groups[0]["lr"]

    def state(self) -> dict[str, Any]:
        return {
            "policies": {k: p.state() for k, p in self.policies.items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "grad_norms": self.grad_norms,
            "data_position": self.step * self.cfg.data.seeds_per_step,
            "guard": self.guard.state_dict(),
            "pending_eval": self.pending_eval,
        }

    def _load(self, state: dict[str, Any]) -> None:
        for key in self.keys:
            self.policies[key].load_state(state["policies"][key])
            self.optimizers[key].load_state_dict(state["optimizers"][key])
        self.grad_norms = state.get("grad_norms", [])

    def save(self, pending_eval: bool = False) -> Path:
        """Checkpoint the current step. Under the guard the training loop saves only weights
        that passed its checks, so this checkpoint becomes the last that passed; with
        ``pending_eval`` the weights passed the step's checks but not yet the held-out
        evaluation due at it: a resume point (a long evaluation interrupted is not paid for
        with the update before it), not a checkpoint that passed. The one that passed before
        it stays on disk (the loop saves none with ``keep_checkpoints=1``)."""
        self.pending_eval = pending_eval
        if not pending_eval:
            self.guard.checkpoint_saved(self.step)
        path = save_checkpoint(
            self.root / "checkpoints", self.step, self.state(), self.cfg.keep_checkpoints
        )
        self.saved_step = self.step
        return path

    def restore(self, step: int, lr: float) -> None:
        """Roll back: the weights, optimiser state and gradient-norm history of the checkpoint
        of ``step``, then learning rate ``lr``. The step counter, and with it the data position
        and the sampling seeds, and the RNG states go on forward, so the retry plays new
        episodes instead of replaying those that led away."""
        self._load(load_checkpoint(self.root / "checkpoints", step))
        for optimizer in self.optimizers.values():
            for group in optimizer.param_groups:
                group["lr"] = lr

    def close(self) -> None:
        self.pool.close()


def fmt_stats(step: int, stats: dict[str, float], keys: tuple[str, ...]) -> str:
    parts = [f"step {step}"]
    for k in keys:
        if k in stats and not math.isnan(stats[k]):
            parts.append(f"{k.split('/')[-1]}={stats[k]:.3g}")
    return " ".join(parts)
