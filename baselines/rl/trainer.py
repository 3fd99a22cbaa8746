"""The training loop shared by GRPO, PPO and SPPO.

Each step: play B seeds x G rollouts with the current weights (Ray actors or in-process), turn
the decisions into samples, recompute the old (and reference) logprobs, compute advantages with
the algorithm's function, run ``ppo_epochs`` passes of minibatch updates, then sync the weights
to the generators. The algorithms differ only in their advantage and loss functions
(``baselines/rl/algos.py``).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from baselines.rl import algos
from baselines.rl.algos import KL_ESTIMATORS
from baselines.rl.checkpoint import load_latest, save_checkpoint
from baselines.rl.config import ALGORITHMS, SHARING
from baselines.rl.policy import LoraOptions, Policy, resolve_model_dir
from baselines.rl.rollout import EpisodeResult, EpisodeSpec, RolloutOptions
from baselines.rl.samples import (
    GROUP_BY,
    RETURN_MODES,
    Batch,
    Sample,
    collate,
    episode_samples,
    per_unit,
)
from baselines.rl.workers import WorkerPool
from benchmark.runner.loggers import namespaced


def rollout_options(cfg: Any) -> RolloutOptions:
    return RolloutOptions(**{k: cfg[k] for k in RolloutOptions.__dataclass_fields__})


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
    """One training run in ``output_dir`` (resumed from its latest checkpoint if any)."""

    def __init__(self, cfg: Any, output_dir: str | Path, log: Callable[[str], None] = print):
        algo = cfg.trainer
        if algo.name not in ALGORITHMS:
            raise ValueError(f"trainer.name={algo.name!r} is not one of {list(ALGORITHMS)}")
        if algo.loss_agg not in algos.AGGREGATIONS:
            raise ValueError(
                f"trainer.loss_agg={algo.loss_agg!r} is not one of {list(algos.AGGREGATIONS)}"
            )
        if cfg.data.group_size < 1 or cfg.data.seeds_per_step < 1:
            raise ValueError("data.group_size and data.seeds_per_step must be >= 1")
        if algo.minibatch_size < 1 or algo.ppo_epochs < 1:
            raise ValueError("trainer.minibatch_size and trainer.ppo_epochs must be >= 1")
        # Checked here, not after the first rollouts.
        if algo.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(
                f"trainer.kl_estimator={algo.kl_estimator!r} is not one of {KL_ESTIMATORS}"
            )
        if algo.return_mode not in RETURN_MODES:
            raise ValueError(
                f"trainer.return_mode={algo.return_mode!r} is not one of {RETURN_MODES}"
            )
        if set(algo.group_by) - set(GROUP_BY):
            raise ValueError(f"trainer.group_by={list(algo.group_by)} may only hold {GROUP_BY}")
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
                target_modules=tuple(cfg.policy.lora_targets),
            )
            if cfg.policy.lora
            else None
        )
        if cfg.policy.sharing not in SHARING:
            raise ValueError(f"policy.sharing={cfg.policy.sharing!r} is not one of {SHARING}")
        if cfg.policy.sharing == "per_agent" and cfg.policy.generator == "vllm":
            raise ValueError(
                "policy.sharing=per_agent needs one vLLM engine per agent; use the torch "
                "generator or policy.sharing=shared"
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
                value_head=algo.name == "ppo",
                lora=self.lora,
                device=cfg.policy.device,
                threads=cfg.threads,
            )
            if algo.kl_coef > 0:
                policy.freeze_reference()
            self.policies[key] = policy
            self.optimizers[key] = torch.optim.AdamW(
                list(policy.parameters()), lr=algo.lr, weight_decay=algo.weight_decay
            )
        self.options = rollout_options(cfg.rollout)
        self.step = 0
        self.grad_norms: list[float] = []
        state = load_latest(self.root / "checkpoints") if cfg.resume else None
        if state is not None:
            for key in self.keys:
                self.policies[key].load_state(state["policies"][key])
                self.optimizers[key].load_state_dict(state["optimizers"][key])
            self.step = state["step"]
            self.grad_norms = state.get("grad_norms", [])
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
        options: RolloutOptions | None = None,
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
        """Held-out episodes with the evaluation temperature."""
        self.sync_weights()
        options = RolloutOptions(
            **{**self.options.__dict__, "temperature": self.cfg.eval.temperature}
        )
        return episode_summary(self.play(self.eval_specs(), options=options), "eval/")

    # ------------------------------------------------------------------ update
    def _advantages(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(B,) sequence advantages for GRPO/SPPO (zeros for PPO) and the keep mask."""
        a = self.algo
        keep = torch.ones(len(batch), dtype=torch.bool)
        if a.filter_zero_variance and a.name != "ppo":
            keep = per_unit(batch, algos.nonzero_variance_groups).bool()
        if a.name == "grpo":
            adv = per_unit(batch, algos.grpo_advantages, norm_by_std=a.norm_by_std)
        elif a.name == "sppo":
            adv = per_unit(batch, algos.sppo_advantages, beta=a.beta)
        else:
            adv = torch.zeros(len(batch))
        return adv, keep

    @torch.no_grad()
    def _score(
        self, policy: Policy, batch: Batch, reference: bool = False
    ) -> tuple[torch.Tensor, Any]:
        """Logprobs (and values) of the batch under the current (or reference) weights."""
        logps, values = [], []
        mb = self.algo.minibatch_size
        for k in range(0, len(batch), mb):
            idx = torch.arange(k, min(k + mb, len(batch)))
            part = batch.select(idx)
            out = policy.forward(
                part.input_ids,
                part.attention_mask,
                values=not reference and self.algo.name == "ppo",
                entropy=False,
                reference=reference,
                prompt_lengths=part.prompt_lengths(),
            )
            width = batch.input_ids.shape[1]
            logps.append(torch.nn.functional.pad(out.logp.cpu(), (0, width - out.logp.shape[1])))
            if out.values is not None:
                values.append(
                    torch.nn.functional.pad(out.values.cpu(), (0, width - out.values.shape[1]))
                )
        return torch.cat(logps), (torch.cat(values) if values else None)

    def _loss(
        self, policy: Policy, part: Batch, extra: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict]:
        a = self.algo
        out = policy.forward(
            part.input_ids,
            part.attention_mask,
            values=a.name == "ppo",
            entropy=True,
            entropy_grad=a.entropy_coef > 0,
            prompt_lengths=part.prompt_lengths(),
        )
        dev = out.logp.device
        mask = part.mask.to(dev)
        weighted = mask * extra["weight"].to(dev).unsqueeze(-1)
        # One pass over one minibatch: the old policy is the current one (ratio 1).
        old = out.logp.detach() if extra["old_logp"] is None else extra["old_logp"].to(dev)
        stats: dict[str, float] = {}
        if a.name == "sppo":
            policy_loss = algos.sppo_loss(out.logp, old, extra["adv"].to(dev), mask, eta=a.eta)
        else:
            adv = extra["adv"].to(dev)
            if adv.dim() == 1:
                adv = adv.unsqueeze(-1).expand_as(mask)
            policy_loss = algos.clipped_policy_loss(
                out.logp, old, adv, weighted, a.clip_low, a.clip_high, a.dual_clip, a.loss_agg
            )
        loss = policy_loss
        stats["losses/policy"] = policy_loss.item()
        if a.name == "ppo":
            assert out.values is not None
            value_loss = algos.clipped_value_loss(
                out.values,
                extra["old_values"].to(dev),
                extra["returns"].to(dev),
                mask,
                a.value_clip,
                a.loss_agg,
            )
            loss = loss + a.vf_coef * value_loss
            stats["losses/value"] = value_loss.item()
        if a.kl_coef > 0:
            kl = algos.aggregate(
                algos.kl_penalty(out.logp, extra["ref_logp"].to(dev), a.kl_estimator),
                mask,
                a.loss_agg,
            )
            loss = loss + a.kl_coef * kl
            stats["losses/kl"] = kl.item()
        entropy = algos.aggregate(out.entropy, mask, "token-mean")
        if a.entropy_coef > 0:
            loss = loss - a.entropy_coef * entropy
        stats["losses/entropy"] = entropy.item()
        stats["losses/total"] = loss.item()
        with torch.no_grad():
            log_ratio = (out.logp - old) * mask
            n = mask.sum().clamp(min=1)
            ratio = torch.exp(log_ratio)
            clipped = ((ratio < 1 - a.clip_low) | (ratio > 1 + a.clip_high)).float() * mask
            stats["charts/clip_frac"] = float(clipped.sum() / n)
            stats["charts/approx_kl"] = float(((ratio - 1) - log_ratio).mul(mask).sum() / n)
        return loss, stats

    def update(self, batch: Batch, key: str = "shared") -> dict[str, float]:
        """Advantages and ``ppo_epochs`` of minibatch updates of policy ``key`` on one batch."""
        a = self.algo
        policy, optimizer = self.policies[key], self.optimizers[key]
        t0 = time.perf_counter()
        adv, keep = self._advantages(batch)
        stats: dict[str, float] = {
            "charts/zero_variance_frac": 1.0 - float(keep.float().mean()),
            "charts/samples": float(keep.sum()),
        }
        group_std = per_unit(batch, _group_std)
        stats["charts/group_reward_std"] = float(group_std.mean())
        if not keep.any():
            stats["perf/logprob_s"] = time.perf_counter() - t0
            stats["perf/update_s"] = 0.0
            return stats
        idx = torch.nonzero(keep).squeeze(-1)
        batch, adv = batch.select(idx), adv[idx]
        weight = torch.ones(len(batch))
        if a.balance_trajectories:
            # Each unit (an agent trajectory) weighs the same whatever its number of decisions.
            _, inverse, counts = torch.unique(batch.unit, return_inverse=True, return_counts=True)
            weight = (len(batch) / len(counts)) / counts[inverse].float()
        single_pass = a.ppo_epochs == 1 and len(batch) <= a.minibatch_size and a.name != "ppo"
        old_logp, old_values = (None, None) if single_pass else self._score(policy, batch)
        extra = {"old_logp": old_logp, "adv": adv, "weight": weight}
        mask = batch.mask
        if old_logp is not None:
            stats["charts/logprob_mismatch"] = float(
                ((old_logp - batch.rollout_logp).abs() * mask).sum() / mask.sum()
            )
        if a.kl_coef > 0:
            extra["ref_logp"], _ = self._score(policy, batch, reference=True)
        if a.name == "ppo":
            assert old_values is not None
            token_adv, returns = algos.gae(batch.rewards, old_values * mask, mask, a.gamma, a.lam)
            n = mask.sum()
            mean = (token_adv * mask).sum() / n
            std = (((token_adv - mean) * mask) ** 2).sum().div(n).sqrt()
            extra["adv"] = (token_adv - mean) / (std + algos.EPS) * mask
            extra["returns"], extra["old_values"] = returns, old_values * mask
            stats["charts/value_mean"] = float((old_values * mask).sum() / n)
        stats["charts/advantage_abs"] = float(extra["adv"].abs().mean())
        t1 = time.perf_counter()
        stats["perf/logprob_s"] = t1 - t0
        order_gen = torch.Generator().manual_seed(hash((self.cfg.seed, self.step)) % 2**31)
        totals: dict[str, list[float]] = {}
        norms = []
        for _ in range(a.ppo_epochs):
            order = torch.randperm(len(batch), generator=order_gen)
            for k in range(0, len(batch), a.minibatch_size):
                idx = order[k : k + a.minibatch_size]
                part = batch.select(idx)
                width = part.input_ids.shape[1]
                sub = {
                    key: None if v is None else v[idx][:, :width] if v.dim() == 2 else v[idx]
                    for key, v in extra.items()
                }
                policy.model.train()
                loss, s = self._loss(policy, part, sub)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                norm = torch.nn.utils.clip_grad_norm_(list(policy.parameters()), a.max_grad_norm)
                optimizer.step()
                policy.model.eval()
                norms.append(float(norm))
                for key, v in s.items():
                    totals.setdefault(key, []).append(v)
        stats.update({k: sum(v) / len(v) for k, v in totals.items()})
        stats["charts/grad_norm"] = max(norms)
        history = self.grad_norms[-20:]
        base = statistics.median(history) if history else max(norms)
        stats["charts/grad_norm_spike"] = max(norms) / (base + 1e-8)
        self.grad_norms = [*self.grad_norms[-99:], *norms]
        stats["perf/update_s"] = time.perf_counter() - t1
        stats["perf/train_tokens_per_s"] = (
            a.ppo_epochs * float(batch.attention_mask.sum()) / max(stats["perf/update_s"], 1e-9)
        )
        return stats

    def _update_all(self, samples: list[Sample]) -> dict[str, float]:
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
        return {k: sum(v) / len(v) for k, v in merged.items()}

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
            for s in episode_samples(
                r, self.options.mode, a.return_mode, tuple(a.group_by), a.turn_gamma
            )
        ]
        stats = self._update_all(samples)
        returns = [v for r in results for v in r.returns.values()]
        gen_tokens = sum(r.gen_tokens for r in results)
        stats.update(episode_summary(results))
        stats.update(
            {
                "charts/return_mean": sum(returns) / len(returns),
                "charts/decisions": float(len(samples))
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

    def state(self) -> dict[str, Any]:
        return {
            "policies": {k: p.state() for k, p in self.policies.items()},
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "grad_norms": self.grad_norms,
            "data_position": self.step * self.cfg.data.seeds_per_step,
        }

    def save(self) -> Path:
        return save_checkpoint(
            self.root / "checkpoints", self.step, self.state(), self.cfg.keep_checkpoints
        )

    def close(self) -> None:
        self.pool.close()


def _group_std(rewards: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """Per-sample std of the returns of its group (the reward-variance collapse signal)."""
    out = torch.zeros_like(rewards)
    for g in torch.unique(groups):
        idx = groups == g
        out[idx] = rewards[idx].std() if int(idx.sum()) > 1 else 0.0
    return out


def fmt_stats(step: int, stats: dict[str, float], keys: tuple[str, ...]) -> str:
    parts = [f"step {step}"]
    for k in keys:
        if k in stats and not math.isnan(stats[k]):
            parts.append(f"{k.split('/')[-1]}={stats[k]:.3g}")
    return " ".join(parts)
