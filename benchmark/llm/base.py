"""One interface over every LLM backend: batched generation with token ids and logprobs, optionally
under a per-chat output constraint, and candidate scoring; plus usage accounting."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

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

    def row_seeds(self, rows: int) -> list[int]:
        """The seed of each chat of a call: chat ``j`` of a call seeded ``seed`` draws from its
        own generator, the same whatever other chats share its batch."""
        return [(self.seed * 1_000_003 + j) % 2**63 for j in range(rows)]

    def key(self) -> dict:
        return {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "stop": list(self.stop),
        }


_CONSTRAINT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ConstraintError(ValueError):
    """A constraint that cannot be turned into a grammar (the message names it and says why)."""


@dataclass(frozen=True, eq=False)
class Constraint:
    """What one generation must match: a JSON schema.

    JSON schema is the one representation every backend takes: llguidance compiles it on the
    ``hf``/``smollm2`` backends, vLLM's structured outputs take it as ``json``, and
    OpenAI-compatible servers take it as ``response_format`` ``json_schema``. ``name``
    (letters, digits, ``_``, ``-``) names it in requests and errors.
    """

    schema: Mapping[str, Any]
    name: str = "output"

    def __post_init__(self) -> None:
        if not isinstance(self.schema, Mapping) or not self.schema:
            raise ConstraintError(
                f"constraint {self.name!r}: the schema must be a non-empty object"
            )
        if not _CONSTRAINT_NAME.match(self.name):
            raise ConstraintError(
                f"constraint name {self.name!r} must be 1-64 letters, digits, '_' or '-'"
            )

    def key(self) -> str:
        """Canonical JSON of the schema (cache keys, grammar caches)."""
        return json.dumps(self.schema, sort_keys=True, separators=(",", ":"))


def per_chat(constraints: Sequence[Constraint | None] | None, n: int) -> list[Constraint | None]:
    """``constraints`` as one entry per chat (``None``: that chat is free-form)."""
    if constraints is None:
        return [None] * n
    out = list(constraints)
    if len(out) != n:
        raise ValueError(f"got {len(out)} constraints for {n} chats; give one per chat (or None)")
    for c in out:
        if c is not None and not isinstance(c, Constraint):
            raise TypeError(f"a constraint must be a Constraint or None, got {type(c).__name__}")
    return out


def sampling_key(sampling: Sampling, constraint: Constraint | None) -> dict:
    """The cache key part for ``sampling`` under ``constraint`` (free-form keys stay as before)."""
    key = sampling.key()
    if constraint is not None:
        key["constraint"] = constraint.key()
    return key


@dataclass
class Generation:
    """One completion: text, the generated token ids and their logprobs (one per token), the
    prompt's token ids, and why it stopped (``stop`` or ``length``). ``constrained`` says the
    text was decoded under the constraint asked for (False when none was asked, or when the
    backend could not apply it, e.g. a server that refused the schema)."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    prompt_ids: list[int]
    finish_reason: str
    cached: bool = False
    prompt_token_count: int = -1  # when a server reports the count but not the ids
    constrained: bool = False
    token_count: int = -1  # generated tokens, when a server reports the count but not the ids

    @property
    def prompt_tokens(self) -> int:
        return self.prompt_token_count if self.prompt_token_count >= 0 else len(self.prompt_ids)

    @property
    def tokens(self) -> int:
        """How many tokens were generated."""
        return self.token_count if self.token_count >= 0 else len(self.token_ids)

    def to_json(self) -> dict:
        return {
            "text": self.text,
            "token_ids": self.token_ids,
            "logprobs": self.logprobs,
            "prompt_ids": self.prompt_ids,
            "finish_reason": self.finish_reason,
            "prompt_token_count": self.prompt_token_count,
            "constrained": self.constrained,
            "token_count": self.token_count,
        }


@dataclass
class Usage:
    """Running totals of one backend instance."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    cache_hits: int = 0
    constrained: int = 0  # generations decoded under their constraint
    grammar_ms: float = 0.0  # time spent computing and applying grammar masks (local backends)
    grammar_steps: int = 0  # decoding steps that were masked
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, generations: list[Generation], latency_ms: float) -> None:
        with self._lock:
            self.calls += len(generations)
            self.tokens_in += sum(g.prompt_tokens for g in generations)
            self.tokens_out += sum(g.tokens for g in generations)
            self.latency_ms += latency_ms
            self.cache_hits += sum(g.cached for g in generations)
            self.constrained += sum(g.constrained for g in generations)

    def add_grammar(self, ms: float, steps: int) -> None:
        with self._lock:
            self.grammar_ms += ms
            self.grammar_steps += steps

    def snapshot(self) -> dict[str, float]:
        return {
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "latency_ms": round(self.latency_ms, 3),
            "cache_hits": self.cache_hits,
            "constrained": self.constrained,
            "grammar_ms": round(self.grammar_ms, 3),
            "grammar_steps": self.grammar_steps,
        }


@runtime_checkable
class LLM(Protocol):
    """What every backend provides."""

    name: str
    usage: Usage

    def generate(
        self,
        chats: list[Chat],
        sampling: Sampling,
        constraints: Sequence[Constraint | None] | None = None,
    ) -> list[Generation]:
        """Complete each chat (as an assistant turn); batched where the backend can. With
        ``constraints`` (one per chat, ``None`` for a free-form chat) each constrained chat's
        text is decoded under its JSON schema."""
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
