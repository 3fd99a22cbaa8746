"""Step-by-step batched decoding from a filled KV cache, for the ``hf``/``smollm2`` backend.

Each step: the model's own log-distribution (log-softmax of the raw logits, temperature 1) is
kept at the chosen token; a logits processor (the grammar) masks the raw logits; then greedy
(``temperature == 0``) takes the argmax, or sampling divides by the temperature, keeps the top-p
nucleus and draws from a ``torch.Generator`` seeded with ``sampling.seed``. This is the order of
``transformers``' ``generate`` (custom processors, then temperature, then top-p), so the nucleus
is taken among the tokens the grammar allows. A row stops at a stop id and is padded after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from transformers import DynamicCache, TopPLogitsWarper

from benchmark.llm.base import Sampling
from benchmark.llm.static_decode import Step

Processor = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def transformers_step(model: Any, cache: DynamicCache) -> Step:
    """A decoding step through the model's own forward, growing ``cache``."""

    def step(token: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return model(
            input_ids=token[:, None],
            attention_mask=mask,
            position_ids=positions[:, None],
            cache=cache,
            use_cache=True,
        ).logits[:, -1]

    return step


def choose(
    scores: torch.Tensor,
    sampling: Sampling,
    generator: torch.Generator | list[torch.Generator] | None,
) -> torch.Tensor:
    """The next token of each row, (rows,), from processed ``scores`` (rows, vocab); a list of
    generators draws each row from its own."""
    if sampling.temperature == 0:
        return scores.argmax(dim=-1)
    scores = scores / sampling.temperature
    if sampling.top_p < 1.0:
        scores = TopPLogitsWarper(sampling.top_p)(None, scores)
    probs = torch.softmax(scores, dim=-1)
    if isinstance(generator, list):
        return torch.cat(
            [
                torch.multinomial(p[None], 1, generator=g)[0]
                for p, g in zip(probs, generator, strict=True)
            ]
        )
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def decode(
    step: Step,
    ids: torch.Tensor,
    mask: torch.Tensor,
    positions: torch.Tensor,
    logits: torch.Tensor,
    sampling: Sampling,
    stop_ids: list[int],
    pad_id: int,
    processor: Processor | None = None,
    seeds: list[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Up to ``sampling.max_tokens`` new tokens per row after a prompt already encoded.

    Args:
        step: runs the model on one new token per row (:func:`transformers_step`, or
            :class:`~benchmark.llm.static_decode.StaticDecoder`'s) and returns the next logits.
        ids: (rows, width) the prompt ids as laid out in the KV cache (pads included; what the
            processor sees, with each new token appended).
        mask: (rows, width) 1 on the prompt's real tokens, 0 on pads.
        positions: (rows,) the position of each row's first new token (its prompt's length).
        logits: (rows, vocab) the model's logits after each prompt's last token.
        seeds: one sampling seed per row (each row drawn from its own generator), instead of
            one generator for the batch seeded with ``sampling.seed``.

    Returns:
        (tokens, logprobs), both (rows, steps): the tokens (``pad_id`` after a row stopped) and
        their logprobs under the model's own distribution. ``steps`` is ``max_tokens``, or fewer
        when every row stopped.
    """
    generator: torch.Generator | list[torch.Generator] | None = None
    if sampling.temperature > 0 and seeds is not None:
        # One generator per row: a row draws the same tokens whatever batch it is in.
        generator = [torch.Generator(device=logits.device).manual_seed(s) for s in seeds]
    elif sampling.temperature > 0:
        generator = torch.Generator(device=logits.device).manual_seed(sampling.seed)
    stops = torch.tensor(stop_ids, device=logits.device)
    done = torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
    positions = positions.clone()
    tokens, logprobs = [], []
    for k in range(sampling.max_tokens):
        raw = logits.float()
        scores = processor(ids, raw) if processor is not None else raw
        token = choose(scores, sampling, generator).masked_fill(done, pad_id)
        tokens.append(token)
        logprobs.append(torch.log_softmax(raw, dim=-1).gather(-1, token[:, None]).squeeze(-1))
        done |= torch.isin(token, stops)
        ids = torch.cat([ids, token[:, None]], dim=1)
        if bool(done.all()) or k == sampling.max_tokens - 1:
            break
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        logits = step(token, positions, mask)
        positions += 1
    return torch.stack(tokens, dim=1), torch.stack(logprobs, dim=1)
