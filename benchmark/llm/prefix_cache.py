"""The KV cache of shared prompt prefixes, for the ``hf``/``smollm2`` backend.

A chat of 2+ messages has a *cacheable prefix*: the chat template's token ids of all its messages
but the last (no generation prompt), kept only when they are an exact token prefix of the full
prompt's ids (:func:`prefix_ids`). The keys and values of each such prefix, computed alone (one
sequence, positions 0..n-1, no padding), are kept in :class:`PrefixKV`, an LRU keyed by the
prefix's token tuple. Computing a prefix alone makes its cached KV a function of its tokens only,
whatever batch first needed it, so a cold and a warm cache give the same numbers.

:func:`batch_cache` lays the prefixes of a batch out as the first region of one
``DynamicCache``: row ``i`` holds ``[left pad][prefix_i]``, so every prefix ends at the same
column and each row's suffix (its last message and the generation prompt) follows in a second,
left-padded region. Pads are masked out and the caller gives explicit position ids, so every real
token sees exactly the tokens of its own prompt, at the positions it has there.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from transformers import DynamicCache

from benchmark.llm.base import Chat

# One layer's keys and values, each (1, kv_heads, prefix_length, head_dim).
LayerKV = tuple[torch.Tensor, torch.Tensor]


def template_ids(tokenizer: Any, chat: Chat, generation_prompt: bool) -> list[int]:
    """The chat template's token ids of ``chat`` (with the assistant's generation prompt when
    ``generation_prompt``)."""
    ids = tokenizer.apply_chat_template(
        chat, add_generation_prompt=generation_prompt, tokenize=True
    )
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


def prefix_ids(tokenizer: Any, chat: Chat, full: list[int]) -> list[int]:
    """The cacheable prefix of ``chat`` whose full prompt ids are ``full``: the template's ids of
    ``chat[:-1]`` when they are a proper token prefix of ``full``, else ``[]`` (a chat of one
    message, or a template or tokenizer that renders or merges across the boundary)."""
    if len(chat) < 2:
        return []
    head = template_ids(tokenizer, chat[:-1], generation_prompt=False)
    if 0 < len(head) < len(full) and full[: len(head)] == head:
        return head
    return []


class PrefixKV:
    """A bounded LRU of prefix KV caches: token tuple -> one (keys, values) pair per layer.

    ``capacity`` entries at most (0 keeps nothing). ``hits``/``misses`` count look-ups.
    """

    def __init__(self, capacity: int) -> None:
        if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 0:
            raise ValueError(f"prefix_cache={capacity!r} must be a non-negative integer")
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, ...], list[LayerKV]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: tuple[int, ...]) -> bool:
        return key in self._entries

    def get(self, key: tuple[int, ...]) -> list[LayerKV] | None:
        """The cached KV of ``key`` (and marks it recently used), or None; counts the look-up."""
        kv = self._entries.get(key)
        if kv is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return kv

    def put(self, key: tuple[int, ...], kv: list[LayerKV]) -> None:
        """Keep ``kv`` under ``key``, dropping the least recently used entries past capacity."""
        if self.capacity == 0:
            return
        self._entries[key] = kv
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        self._entries.clear()


def encode_prefix(model: Any, ids: list[int], device: torch.device) -> list[LayerKV]:
    """The keys and values of ``ids`` run alone through ``model`` (positions 0..len-1)."""
    cache = DynamicCache(config=model.config)
    model(
        input_ids=torch.tensor([ids], device=device),
        cache=cache,
        use_cache=True,
        logits_to_keep=1,
    )
    return [(layer.keys, layer.values) for layer in cache.layers]


def batch_cache(
    config: Any, kvs: list[list[LayerKV] | None], width: int
) -> tuple[DynamicCache, torch.Tensor]:
    """A fresh cache holding row ``i``'s prefix KV ``kvs[i]`` right-aligned in ``width`` columns
    (``None``: no prefix), and its (rows, width) attention mask (1 on prefix tokens).

    The rows are copies: decoding appends to this cache, never to the cached prefixes.
    """
    cache = DynamicCache(config=config)
    sample = next(kv for kv in kvs if kv is not None)
    mask = torch.zeros((len(kvs), width), dtype=torch.long, device=sample[0][0].device)
    for layer_idx in range(len(sample)):
        k0, v0 = sample[layer_idx]
        keys = k0.new_zeros((len(kvs), k0.shape[1], width, k0.shape[3]))
        values = v0.new_zeros((len(kvs), v0.shape[1], width, v0.shape[3]))
        for row, kv in enumerate(kvs):
            if kv is None:
                continue
            k, v = kv[layer_idx]
            keys[row, :, width - k.shape[2] :] = k[0]
            values[row, :, width - v.shape[2] :] = v[0]
        cache.update(keys, values, layer_idx)
    for row, kv in enumerate(kvs):
        if kv is not None:
            mask[row, width - kv[0][0].shape[2] :] = 1
    return cache, mask


def uses_sliding_windows(config: Any) -> bool:
    """Whether a model attends through sliding windows, whose masks count columns, not positions
    (a padded middle region would shift them): such a model gets no prefix reuse."""
    return any(DynamicCache(config=config).is_sliding)
