"""``python -m baselines.rl.recipes.bench``: one GRPO update of ours against TRL's ``GRPOTrainer``.

Prints one JSON line of figures (after a table); ``--repeats`` timed updates per side (default
5). Needs the ``bench`` extra (TRL).

Both sides start from the same tiny Llama directory (float32, the same torch threads, no gradient
checkpointing) and update on the same synthetic batch: ``prompts`` prompts x ``group_size``
completions, every prompt ``prompt_len`` tokens, completions of varying length up to
``completion_len`` (so that token-mean aggregation weighs sequences unequally).

The timed work is the same on both sides, from scored completions to updated weights:

* ours: ``Trainer.update(batch)``: group advantages, then one minibatch (the whole batch) of
  forward, clipped loss, backward, gradient clipping and an AdamW step. With one epoch over one
  minibatch the old policy is the current one, so neither side runs a separate old-logprob pass
  (ours takes the detached logprobs of the loss forward, as TRL does at ``num_iterations=1``).
  Rows that complete the same prompt share one prompt forward (``Policy.forward`` with
  ``prompt_lengths``).
* TRL: its group advantages (``_generate_and_score_completions``), then what
  ``Trainer.training_step`` and the inner loop do: ``compute_loss``, backward,
  ``clip_grad_norm_`` and an AdamW step.

``trl_old_ms`` also times TRL with a no-grad ``_get_per_token_logps_and_entropies`` pass for
``old_per_token_logps`` first (what it runs when ``num_iterations > 1``), for reference. The
sides run alternately, after one warm-up each.

The loss check runs first, on the initial weights: our policy loss (the ratio is 1, since the
old logprobs come from the same weights) against TRL's loss, both from our advantages (TRL's
differ only in the std epsilon, 1e-4 instead of 1e-6), and the pre-clip gradient norms, which
depend on every logprob and so check the alignment of the two forwards.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from baselines.rl.core import algos
from baselines.rl.core.config import AlgoSettings, DataSettings, PolicySettings, TrainSettings
from baselines.rl.core.policy import load_tokenizer
from baselines.rl.core.samples import Batch, Sample, collate, per_unit
from baselines.rl.core.trainer import Trainer
from benchmark.llm.tiny import save_tiny_llama, train_tokenizer
from benchmark.runner.config import LoggerConfig
from benchmark.tasks.spec import task_registry

TRL_MISSING = (
    "baselines.rl.recipes.bench compares against TRL, an optional dependency: install the bench "
    "extra with: pip install -e '.[bench]' torch==2.13.0"
)


@dataclass(frozen=True)
class TrainerBenchSpec:
    """The model, batch and optimiser both trainers get."""

    prompts: int = 8  # distinct prompts (GRPO groups)
    group_size: int = 4  # completions per prompt (G, TRL's num_generations)
    prompt_len: int = 128  # tokens per prompt
    completion_len: int = 16  # longest completion (TRL's max_completion_length)
    hidden: int = 128  # tiny Llama width
    layers: int = 4  # tiny Llama depth
    heads: int = 4  # attention heads
    vocab: int = 1000  # tokenizer size asked for (the task instructions may yield fewer)
    lr: float = 1e-4  # AdamW learning rate
    clip: float = 0.2  # PPO ratio clip (our clip_low = clip_high, TRL's epsilon)
    max_grad_norm: float = 1.0  # gradient clipping
    threads: int = 2  # torch CPU threads
    seed: int = 0  # model init, tokens and rewards

    def __post_init__(self) -> None:
        for name in ("prompts", "prompt_len", "completion_len", "hidden", "layers", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")
        if self.group_size < 2:
            raise ValueError(f"group_size={self.group_size} must be >= 2 (GRPO needs a group)")
        if self.hidden % self.heads:
            raise ValueError(f"hidden={self.hidden} must be a multiple of heads={self.heads}")

    @property
    def batch_size(self) -> int:
        return self.prompts * self.group_size


def require_trl() -> None:
    """Raise ImportError naming the ``bench`` extra when TRL is not installed."""
    try:
        import trl  # noqa: F401
    except ImportError as err:
        raise ImportError(TRL_MISSING) from err


# ---------------------------------------------------------------------- shared inputs
def make_tiny_model(out_dir: Path, spec: TrainerBenchSpec) -> Path:
    """A tiny Llama with a tokenizer trained on every task instruction."""
    corpus = [text for task in task_registry().values() for text in task.instructions.values()]
    tokenizer = train_tokenizer(corpus, vocab_size=spec.vocab)
    return save_tiny_llama(
        out_dir,
        tokenizer,
        hidden=spec.hidden,
        layers=spec.layers,
        heads=spec.heads,
        seed=spec.seed,
        max_positions=max(2048, spec.prompt_len + spec.completion_len),
    )


@dataclass(frozen=True)
class Rollouts:
    """Scored completions. prompt_ids: (B, P); completion_ids, completion_mask: (B, C), right
    padded; rewards: (B,), grouped in consecutive runs of ``group_size``."""

    prompt_ids: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    rewards: torch.Tensor


def make_rollouts(tokenizer: Any, spec: TrainerBenchSpec) -> Rollouts:
    """Prompts cut from the task instructions, random completions ending with end-of-sequence
    (the longest of each group fills ``completion_len``) and rewards that vary within groups."""
    gen = torch.Generator().manual_seed(spec.seed)
    texts = [text for task in task_registry().values() for text in task.instructions.values()]
    stream = tokenizer(" ".join(texts), add_special_tokens=False)["input_ids"]
    while len(stream) < spec.prompts + spec.prompt_len:
        stream = stream + stream
    B, G, C = spec.batch_size, spec.group_size, spec.completion_len
    special = {tokenizer.pad_token_id, tokenizer.eos_token_id}
    prompts = [stream[j : j + spec.prompt_len] for j in range(spec.prompts)]
    prompt_ids = torch.tensor([p for p in prompts for _ in range(G)])
    completion_ids = torch.randint(max(special) + 1, len(tokenizer), (B, C), generator=gen)
    lengths = torch.randint(max(1, C // 2), C + 1, (B,), generator=gen)
    lengths[::G] = C
    completion_mask = (torch.arange(C) < lengths.unsqueeze(-1)).long()
    completion_ids = completion_ids.masked_fill(completion_mask == 0, tokenizer.pad_token_id)
    short = lengths < C
    completion_ids[short, lengths[short] - 1] = tokenizer.eos_token_id
    rewards = torch.randn(B, generator=gen)
    return Rollouts(prompt_ids, completion_ids, completion_mask, rewards)


def our_batch(rollouts: Rollouts, group_size: int, pad_id: int) -> Batch:
    """Our :class:`~baselines.rl.core.samples.Batch`: one sample per completion, its own unit."""
    samples = []
    P = rollouts.prompt_ids.shape[1]
    for b in range(len(rollouts.rewards)):
        n = int(rollouts.completion_mask[b].sum())
        ids = rollouts.prompt_ids[b].tolist() + rollouts.completion_ids[b, :n].tolist()
        R = float(rollouts.rewards[b])
        samples.append(
            Sample(
                ids=ids,
                mask=[0] * P + [1] * n,
                logprobs=[0.0] * len(ids),
                rewards=[(len(ids) - 1, R)],
                R=R,
                group=(b // group_size,),
                unit=(b,),
                agent="agent_0",
                turn=0,
            )
        )
    return collate(samples, pad_id)


# ---------------------------------------------------------------------- the two trainers
def our_trainer(model_dir: Path, out_dir: Path, spec: TrainerBenchSpec) -> Trainer:
    """Our GRPO trainer with TRL's defaults where they differ: token-mean loss (TRL's ``dapo``),
    no dual clip, no zero-variance filter, no entropy bonus, no KL."""
    settings = TrainSettings(
        trainer=AlgoSettings(
            name="grpo",
            norm_by_std=True,
            clip_low=spec.clip,
            clip_high=spec.clip,
            dual_clip=None,
            kl_coef=0.0,
            loss_agg="token-mean",
            entropy_coef=0.0,
            filter_zero_variance=False,
            ppo_epochs=1,
            minibatch_size=spec.batch_size,
            lr=spec.lr,
            weight_decay=0.0,
            max_grad_norm=spec.max_grad_norm,
        ),
        policy=PolicySettings(init=str(model_dir)),
        data=DataSettings(seeds_per_step=spec.prompts, group_size=spec.group_size),
        logger=LoggerConfig(console=False, wandb=False),
        workers=0,
        threads=spec.threads,
        seed=spec.seed,
        resume=False,
        output_dir=str(out_dir),
    )
    return Trainer(settings, out_dir, log=lambda _: None)


def trl_trainer(model_dir: Path, out_dir: Path, spec: TrainerBenchSpec) -> Any:
    """TRL's GRPOTrainer on a fresh load of ``model_dir``, configured like :func:`our_trainer`;
    ``optim="adamw_torch"`` gives it the same ``torch.optim.AdamW`` as ours (TRL's default is the
    fused kernel)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        bf16=False,
        fp16=False,
        report_to="none",
        logging_strategy="no",
        save_strategy="no",
        disable_tqdm=True,
        seed=spec.seed,
        per_device_train_batch_size=spec.batch_size,
        gradient_accumulation_steps=1,
        num_generations=spec.group_size,
        max_completion_length=spec.completion_len,
        num_iterations=1,
        beta=0.0,
        epsilon=spec.clip,
        loss_type="dapo",
        scale_rewards="group",
        learning_rate=spec.lr,
        weight_decay=0.0,
        max_grad_norm=spec.max_grad_norm,
        optim="adamw_torch",
        activation_checkpointing=False,
    )
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["-"] * spec.batch_size}),
        processing_class=load_tokenizer(model_dir),
    )
    if trainer.model.is_activation_checkpointing:
        raise RuntimeError("TRL enabled gradient checkpointing; the comparison needs it off")
    trainer.create_optimizer()
    # What Trainer's training loop sets before each step (no gradient accumulation).
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def trl_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """TRL's group-normalised advantages (``scale_rewards="group"``), as in
    ``GRPOTrainer._generate_and_score_completions``. (B,) -> (B,)."""
    from trl.trainer.utils import nanstd

    grouped = rewards.view(-1, group_size)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(group_size, dim=0)
    std = nanstd(grouped, dim=1).repeat_interleave(group_size, dim=0)
    return torch.nan_to_num((rewards - mean) / (std + 1e-4), nan=0.0)


def trl_update(
    trainer: Any,
    rollouts: Rollouts,
    old_logps: bool = True,
    advantages: torch.Tensor | None = None,
) -> tuple[float, float]:
    """One TRL update from scored completions; returns (loss, pre-clip gradient norm).

    Args:
        old_logps: score ``old_per_token_logps`` with a no-grad pass first (as ours does).
        advantages: (B,) use these instead of TRL's own.
    """
    model = trainer.model
    B = len(rollouts.rewards)
    if advantages is None:
        advantages = trl_advantages(rollouts.rewards, trainer.num_generations)
    inputs = {
        "prompt_ids": rollouts.prompt_ids,
        "prompt_mask": torch.ones_like(rollouts.prompt_ids),
        "completion_ids": rollouts.completion_ids,
        "completion_mask": rollouts.completion_mask,
        "advantages": advantages,
        "num_items_in_batch": rollouts.completion_mask.sum(),
    }
    if old_logps:
        with torch.no_grad():
            inputs["old_per_token_logps"], _, _ = trainer._get_per_token_logps_and_entropies(
                model,
                torch.cat([rollouts.prompt_ids, rollouts.completion_ids], dim=1),
                torch.cat([inputs["prompt_mask"], rollouts.completion_mask], dim=1),
                rollouts.completion_ids.shape[1],
                batch_size=B,
            )
    model.train()
    with trainer.compute_loss_context_manager():
        loss = trainer.compute_loss(model, inputs)
    trainer.accelerator.backward(loss)
    norm = trainer.accelerator.clip_grad_norm_(model.parameters(), trainer.args.max_grad_norm)
    trainer.optimizer.step()
    model.zero_grad(set_to_none=True)
    return float(loss.detach()), float(norm)


# ---------------------------------------------------------------------- the comparison
def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return 1000 * (time.perf_counter() - start)


def compare(
    spec: TrainerBenchSpec | None = None,
    repeats: int = 5,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Check equal losses, then time ``repeats`` updates of each side after one warm-up each;
    logs a table and returns the figures (milliseconds, medians)."""
    require_trl()
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
    spec = spec or TrainerBenchSpec()
    saved_threads = torch.get_num_threads()
    try:
        return _compare(spec, repeats, log)
    finally:
        torch.set_num_threads(saved_threads)


def _compare(spec: TrainerBenchSpec, repeats: int, log: Callable[[str], None]) -> dict[str, Any]:
    torch.set_num_threads(spec.threads)
    with tempfile.TemporaryDirectory(prefix="bench-trainer") as tmp:
        root = Path(tmp)
        model_dir = make_tiny_model(root / "model", spec)
        ours = our_trainer(model_dir, root / "ours", spec)
        trl = trl_trainer(model_dir, root / "trl", spec)
        # TRL's Accelerator set-up may change the thread count; both sides must run with the same.
        torch.set_num_threads(spec.threads)
        tokenizer = ours.policy.tokenizer
        rollouts = make_rollouts(tokenizer, spec)
        batch = our_batch(rollouts, spec.group_size, tokenizer.pad_token_id)

        shared_adv = per_unit(batch, algos.grpo_advantages, norm_by_std=True)
        first = ours.update(batch)
        loss_trl, norm_trl = trl_update(trl, rollouts, advantages=shared_adv)
        loss_ours, norm_ours = first["losses/policy"], first["charts/grad_norm"]

        times: dict[str, list[float]] = {"ours": [], "trl": [], "trl_old": []}
        runs = {
            "ours": lambda: ours.update(batch),
            "trl": lambda: trl_update(trl, rollouts, old_logps=False),
            "trl_old": lambda: trl_update(trl, rollouts),
        }
        for k in range(repeats + 1):
            for name, run in runs.items():
                ms = _timed(run)
                if k > 0:
                    times[name].append(ms)
        threads = torch.get_num_threads()
        vocab = len(tokenizer)

    med = {name: statistics.median(v) for name, v in times.items()}
    figures = {
        "bench": "trainer",
        "ours_ms": round(med["ours"], 1),
        "trl_ms": round(med["trl"], 1),
        "ratio": round(med["ours"] / med["trl"], 3),
        "trl_old_ms": round(med["trl_old"], 1),
        "loss_ours": loss_ours,
        "loss_trl": loss_trl,
        "loss_abs_diff": abs(loss_ours - loss_trl),
        "grad_norm_ours": norm_ours,
        "grad_norm_trl": norm_trl,
        "repeats": repeats,
        "batch": spec.batch_size,
        "vocab": vocab,
        "threads": threads,
        "spec": asdict(spec),
    }
    log(_table(figures, times))
    return figures


def _table(figures: dict[str, Any], times: dict[str, list[float]]) -> str:
    s = figures["spec"]
    lines = [
        f"GRPO update, tiny Llama h{s['hidden']} x{s['layers']} (vocab {figures['vocab']}), "
        f"B={figures['batch']} ({s['prompts']} prompts x G={s['group_size']}), "
        f"prompt {s['prompt_len']} + completion <= {s['completion_len']} tokens, "
        f"float32, {figures['threads']} threads",
        f"{'side':<34}{'median ms':>10}{'min ms':>9}{'max ms':>9}",
    ]
    labels = {
        "ours": "ours Trainer.update",
        "trl": "TRL GRPOTrainer update",
        "trl_old": "TRL, plus an old-logprob pass",
    }
    for name, label in labels.items():
        v = times[name]
        lines.append(f"{label:<34}{statistics.median(v):>10.1f}{min(v):>9.1f}{max(v):>9.1f}")
    lines.append(f"ratio ours/TRL {figures['ratio']:.3f} (target <= 0.5)")
    lines.append(
        f"loss ours {figures['loss_ours']:.8f}  TRL {figures['loss_trl']:.8f}  "
        f"|diff| {figures['loss_abs_diff']:.2e}; grad norm ours {figures['grad_norm_ours']:.6f}  "
        f"TRL {figures['grad_norm_trl']:.6f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="One GRPO update of ours against TRL's.")
    parser.add_argument("--repeats", type=int, default=5, help="timed updates per side")
    args = parser.parse_args(argv)
    print(json.dumps(compare(repeats=args.repeats)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
