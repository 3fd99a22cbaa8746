"""One interface over every LLM backend: batched generation with token ids and logprobs, and
candidate scoring; plus usage accounting."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

Chat = list[dict[str, str]]  # [{"role": "system"|"user"|"assistant", "content": ...}, ...]


@dataclass(frozen=True)
class Sampling:
    """Decoding parameters. ``temperature=0`` is greedy; sampling is seeded by ``seed``."""

    max_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens!r} must be a positive integer")
        if not 0.0 <= self.temperature <= 5.0:
            raise ValueError(f"temperature={self.temperature!r} must be in [0, 5]")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p={self.top_p!r} must be in (0, 1]")

    def key(self) -> dict:
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "stop": list(self.stop),
        }


@dataclass
class Generation:
    """One completion: text, the generated token ids and their logprobs (one per token), the
    prompt's token ids, and why it stopped (``stop`` or ``length``)."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    prompt_ids: list[int]
    finish_reason: str
    cached: bool = False
    prompt_token_count: int = -1  # when a server reports the count but not the ids

    @property
    def prompt_tokens(self) -> int:
        return self.prompt_token_count if self.prompt_token_count >= 0 else len(self.prompt_ids)

    def to_json(self) -> dict:
        return {
            "text": self.text,
            "token_ids": self.token_ids,
            "logprobs": self.logprobs,
            "prompt_ids": self.prompt_ids,
            "finish_reason": self.finish_reason,
            "prompt_token_count": self.prompt_token_count,
        }


@dataclass
class Usage:
    """Running totals of one backend instance."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    cache_hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, generations: list[Generation], latency_ms: float) -> None:
        with self._lock:
            self.calls += len(generations)
            self.tokens_in += sum(g.prompt_tokens for g in generations)
            self.tokens_out += sum(len(g.token_ids) for g in generations)
            self.latency_ms += latency_ms
            self.cache_hits += sum(g.cached for g in generations)

    def snapshot(self) -> dict[str, float]:
        return {
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "latency_ms": round(self.latency_ms, 3),
            "cache_hits": self.cache_hits,
        }


@runtime_checkable
class LLM(Protocol):
    """What every backend provides."""

    name: str
    usage: Usage

    def generate(self, chats: list[Chat], sampling: Sampling) -> list[Generation]:
        """Complete each chat (as an assistant turn); batched where the backend can."""
        ...

    def score(self, prompt: Chat, candidates: list[str]) -> list[float]:
        """Total logprob of each candidate as the assistant's reply to ``prompt``."""
        ...


def pad_left(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded (ids, attention mask) of token rows, both (len(rows), longest) long tensors."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, width - len(r) :] = torch.as_tensor(r, dtype=torch.long)
        mask[k, width - len(r) :] = 1
    return ids, mask


def truncate_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """Cut ``text`` at the first stop string; returns (text, whether a stop was found)."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
