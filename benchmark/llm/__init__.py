"""LLM backends behind one interface: ``smollm2`` (embedded default), ``hf``, ``openai``, ``vllm``.

>>> from benchmark.llm import make_llm, Sampling
>>> llm = make_llm("smollm2")                      # doctest: +SKIP
>>> llm.generate([[{"role": "user", "content": "hi"}]], Sampling(max_tokens=8))  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.llm.base import (
    LLM,
    Chat,
    Constraint,
    ConstraintError,
    Generation,
    Sampling,
    Usage,
)
from benchmark.llm.cache import ResponseCache

BACKENDS = ("smollm2", "hf", "openai", "vllm")


def make_llm(backend: str, model: str = "", cache: str | Path | None = None, **options: Any) -> LLM:
    """Build a backend. ``model``: a model directory (hf, vllm), or the served model name
    (openai, with ``base_url`` in options); ``cache``: an SQLite response-cache file."""
    store = ResponseCache(cache) if cache else None
    if backend == "smollm2":
        from benchmark.llm.hf import HFBackend
        from benchmark.llm.smollm2 import MODEL_NAME, smollm2_dir

        return HFBackend(smollm2_dir(), name=MODEL_NAME, cache=store, **options)
    if backend == "hf":
        from benchmark.llm.hf import HFBackend

        if not model:
            raise ValueError("llm backend 'hf' needs model=<a transformers model directory>")
        return HFBackend(model, cache=store, **options)
    if backend == "openai":
        from benchmark.llm.openai_backend import OpenAIBackend

        if "base_url" not in options or not model:
            raise ValueError("llm backend 'openai' needs model=<served name> and options.base_url")
        return OpenAIBackend(model=model, cache=store, **options)
    if backend == "vllm":
        from benchmark.llm.smollm2 import MODEL_NAME, smollm2_dir
        from benchmark.llm.vllm_backend import VLLMBackend

        if model:
            return VLLMBackend(model, **options)
        return VLLMBackend(smollm2_dir(), name=MODEL_NAME, **options)
    raise ValueError(f"unknown llm backend {backend!r}; valid backends are {list(BACKENDS)}")


__all__ = [
    "BACKENDS",
    "LLM",
    "Chat",
    "Constraint",
    "ConstraintError",
    "Generation",
    "ResponseCache",
    "Sampling",
    "Usage",
    "make_llm",
]
