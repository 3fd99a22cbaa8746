"""A response-cache writer for the multi-process cache test, in a module of its own so that
each spawned process imports only the cache, not the test module's models and servers."""

from __future__ import annotations

from benchmark.llm.cache import ResponseCache


def write_keys(path: str, start: int, count: int = 150) -> None:
    """Store ``count`` entries ``key-<k>`` -> ``{"text": "<k>"}`` from ``k = start``."""
    store = ResponseCache(path)
    for k in range(start, start + count):
        store.put(f"key-{k}", {"text": str(k)})
