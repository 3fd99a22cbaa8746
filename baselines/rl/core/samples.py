"""From played episodes to training samples and padded tensors.

A sample is one token sequence with a loss mask that is 1 on generated tokens only, the rollout
logprobs of those tokens, and its rewards placed on generated tokens: in ``per_step`` mode one
sample per decision, its return on the last generated token; in ``concat`` mode one sample per
agent sequence, each turn's reward on that turn's last generated token.

``R`` is the scalar return group-relative advantages compare: the agent's episode return
(``return_mode=episode``) or its return from this sample's first decision (``to_go``). The
group key is the episode seed's group, optionally with the agent and the turn; the ``unit`` is
what one advantage is computed for (a whole agent trajectory when R is the episode return).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from baselines.rl.core.rollout import Decision, EpisodeResult

GROUP_BY = ("agent", "turn")
RETURN_MODES = ("episode", "to_go")


@dataclass
class Sample:
    ids: list[int]
    mask: list[int]
    logprobs: list[float]
    rewards: list[tuple[int, float]]  # (position, reward) on generated tokens
    R: float
    group: tuple
    unit: tuple
    agent: str
    turn: int


@dataclass
class Batch:
    """Right-padded tensors, all (B, T) except ``R``, ``group`` and ``unit`` (B,)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    mask: torch.Tensor
    rollout_logp: torch.Tensor
    rewards: torch.Tensor
    R: torch.Tensor
    group: torch.Tensor
    unit: torch.Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def prompt_lengths(self) -> torch.Tensor:
        """(B,) the position of each row's first generated token."""
        return self.mask.argmax(-1)

    def select(self, idx: torch.Tensor) -> Batch:
        """The rows ``idx``, trimmed to their longest sequence."""
        width = int(self.attention_mask[idx].sum(-1).max())
        return Batch(
            *(getattr(self, f)[idx][:, :width] for f in _TOKEN_FIELDS),
            self.R[idx],
            self.group[idx],
            self.unit[idx],
        )


_TOKEN_FIELDS = ("input_ids", "attention_mask", "mask", "rollout_logp", "rewards")


def _to_go(rewards: list[float], gamma: float) -> list[float]:
    out, running = [0.0] * len(rewards), 0.0
    for k in reversed(range(len(rewards))):
        running = rewards[k] + gamma * running
        out[k] = running
    return out


def _sequence(turns: list[Decision]) -> tuple[list[int], list[int], list[float], list[int]]:
    """ids, mask, logprobs and the last generated position of each turn, for decisions whose
    prompts extend one another (concat) or a single decision (per_step)."""
    last = turns[-1]
    ids = last.prompt_ids + last.gen_ids
    mask = [0] * len(ids)
    logp = [0.0] * len(ids)
    ends = []
    for d in turns:
        start = len(d.prompt_ids)
        if ids[start : start + len(d.gen_ids)] != d.gen_ids:
            raise ValueError(f"{d.agent} turn {d.turn}: prompts do not extend one another")
        for k, lp in enumerate(d.logprobs):
            mask[start + k] = 1
            logp[start + k] = lp
        ends.append(start + len(d.gen_ids) - 1)
    return ids, mask, logp, ends


def episode_samples(
    result: EpisodeResult,
    mode: str = "per_step",
    return_mode: str = "episode",
    group_by: tuple[str, ...] = (),
    gamma: float = 1.0,
) -> list[Sample]:
    """The training samples of one episode."""
    if return_mode not in RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r} must be one of {list(RETURN_MODES)}")
    unknown = set(group_by) - set(GROUP_BY)
    if unknown:
        raise ValueError(f"group_by {sorted(unknown)} unknown; valid: {list(GROUP_BY)}")
    spec = result.spec
    out = []
    for agent, decisions in result.decisions.items():
        if not decisions:
            continue
        to_go = _to_go([d.reward for d in decisions], gamma)
        if mode == "per_step":
            chunks = [[d] for d in decisions]
        else:
            chunks = []
            for d in decisions:
                if chunks and chunks[-1][-1].segment == d.segment:
                    chunks[-1].append(d)
                else:
                    chunks.append([d])
        for chunk in chunks:
            ids, mask, logp, ends = _sequence(chunk)
            first = chunk[0].turn
            R = to_go[0] if return_mode == "episode" else to_go[first]
            if mode == "per_step":
                rewards = [(ends[0], to_go[first] if return_mode == "to_go" else R)]
            else:
                rewards = [(e, d.reward) for e, d in zip(ends, chunk, strict=True)]
            key: tuple = (spec.group,)
            if "agent" in group_by:
                key += (agent,)
            if "turn" in group_by:
                key += (first,)
            per_sample = return_mode == "to_go" or "turn" in group_by
            unit = (spec.index, agent, first) if per_sample else (spec.index, agent)
            out.append(Sample(ids, mask, logp, rewards, R, key, unit, agent, first))
    return out


def collate(samples: list[Sample], pad_id: int) -> Batch:
    """Right-pad samples into a :class:`Batch`; groups and units become integer ids."""
    if not samples:
        raise ValueError("no samples to collate")
    width = max(len(s.ids) for s in samples)
    B = len(samples)
    ids = torch.full((B, width), pad_id, dtype=torch.long)
    attn = torch.zeros((B, width), dtype=torch.long)
    mask = torch.zeros((B, width))
    logp = torch.zeros((B, width))
    rewards = torch.zeros((B, width))
    groups: dict[tuple, int] = {}
    units: dict[tuple, int] = {}
    for b, s in enumerate(samples):
        n = len(s.ids)
        ids[b, :n] = torch.tensor(s.ids)
        attn[b, :n] = 1
        mask[b, :n] = torch.tensor(s.mask, dtype=torch.float32)
        logp[b, :n] = torch.tensor(s.logprobs)
        for pos, r in s.rewards:
            rewards[b, pos] += r
        groups.setdefault(s.group, len(groups))
        units.setdefault(s.unit, len(units))
    return Batch(
        ids,
        attn,
        mask,
        logp,
        rewards,
        torch.tensor([s.R for s in samples]),
        torch.tensor([groups[s.group] for s in samples]),
        torch.tensor([units[s.unit] for s in samples]),
    )


def per_unit(batch: Batch, fn: Callable[..., torch.Tensor], **kwargs: Any) -> torch.Tensor:
    """Apply a group-relative function ``fn(returns, groups, **kwargs)`` to one return per unit
    and broadcast its result back to every sample of the unit. Returns (B,) floats."""
    units = torch.unique(batch.unit)
    first = torch.stack([torch.nonzero(batch.unit == u)[0, 0] for u in units])
    per = fn(batch.R[first], batch.group[first], **kwargs)
    out = torch.zeros(len(batch))
    for k, u in enumerate(units):
        out[batch.unit == u] = per[k].float()
    return out
