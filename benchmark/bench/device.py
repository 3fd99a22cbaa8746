"""Generated tokens/s of an LLM backend on given chats, free and under per-chat constraints: the
generation part of the GPU check (``scripts/device_check.sh``, which gives it the ``hf``
backend on CUDA and recorded ``llm_agents`` decisions with their decision schemas)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmark.llm.base import Chat, Constraint, Sampling


def generation_rate(
    llm: Any,
    chats: Sequence[Chat],
    constraints: Sequence[Constraint | None] | None,
    max_tokens: int,
    repeats: int,
    sync: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Generated tokens/s of one ``llm.generate`` call on ``chats`` (sampled at temperature 1,
    seeded), best of ``repeats`` after a warm-up call on the same chats. The warm-up fills the
    backend's prompt-prefix cache and compiles the grammars, as the first decision of an
    episode does for the later ones; the timed calls include encoding the rest of each prompt.
    ``sync`` waits for the device (``torch.cuda.synchronize``) before a clock is read.

    Returns ``tokens_per_s``, ``tokens`` and ``seconds`` of the best call, and for constrained
    chats ``held``: the share of replies decoded under their constraint to the end."""
    if repeats < 1:
        raise ValueError(f"repeats={repeats} must be >= 1")
    kwargs = {} if constraints is None else {"constraints": list(constraints)}
    llm.generate(list(chats), Sampling(max_tokens=max_tokens, temperature=1.0, seed=0), **kwargs)
    best: dict[str, Any] = {}
    for r in range(repeats):
        sampling = Sampling(max_tokens=max_tokens, temperature=1.0, seed=r + 1)
        sync()
        start = time.perf_counter()
        gens = llm.generate(list(chats), sampling, **kwargs)
        sync()
        seconds = time.perf_counter() - start
        tokens = sum(len(g.token_ids) for g in gens)
        if not best or tokens / seconds > best["tokens_per_s"]:
            best = {"tokens_per_s": tokens / seconds, "tokens": tokens, "seconds": seconds}
            if constraints is not None:
                best["held"] = sum(g.constrained for g in gens) / len(gens)
    return best


def rates_by_batch(
    llm: Any,
    chats: Sequence[Chat],
    constraints: Sequence[Constraint],
    batches: Sequence[int],
    max_tokens: int,
    repeats: int,
    sync: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """:func:`generation_rate` at each batch size, free (``free_b<N>``) and constrained
    (``constrained_b<N>``): batch N takes the first N chats (cycling through them when there
    are fewer). Each entry's ``tokens_per_s`` rounded to 0.1."""
    if not chats or len(chats) != len(constraints):
        raise ValueError(f"{len(chats)} chats and {len(constraints)} constraints: need one each")
    out: dict[str, Any] = {}
    for batch in batches:
        rows = [k % len(chats) for k in range(batch)]
        picked = [chats[k] for k in rows]
        for name, held in (("free", None), ("constrained", [constraints[k] for k in rows])):
            rate = generation_rate(llm, picked, held, max_tokens, repeats, sync)
            rate["tokens_per_s"] = round(rate["tokens_per_s"], 1)
            rate["seconds"] = round(rate["seconds"], 3)
            out[f"{name}_b{batch}"] = rate
    return out
