"""Decoding steps for Llama-architecture models (SmolLM2's) over a static KV cache.

transformers' forward serves any model, cache and mask. At one new token per row its Python
work (the 4-D mask, the cache's bookkeeping, each layer's keys and values grown by
concatenation, the output objects) is a large share of a 135M model's step on one thread.
:class:`StaticDecoder` runs the same computation with the model's own modules and weights, over
keys and values allocated once for the whole reply, and with each layer's query, key and value
projections (and its gate and up projections) in one matmul when they are 4-bit
(:meth:`~benchmark.llm.int4.Int4Linear.concat`: their output rows concatenated; the kernel
computes each output row alone, so the result is the same). A peft LoRA layer around one of
them adds its own update to its slice, as peft's forward does. Every operation is transformers'
own in the same order (its RMS norm, rotary embedding, SDPA attention with the same grouping of
query heads), so a step's logits are those of ``model(...)`` on the same cache, bit for bit
(``tests/test_llm_static_decode.py``).

:func:`static_decoder` returns None for a model this does not cover (another architecture, or
layers of another shape): the backend then steps through transformers. A projection it cannot
fuse (not 4-bit, a bias, a LoRA variant such as DoRA) runs through its own module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.llm.int4 import Int4Linear, concatenable

# One step: (tokens (rows,), positions (rows,), mask (rows, columns) of 1 on real tokens) ->
# the logits after those tokens (rows, vocab).
Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _lora_parts(module: nn.Module) -> tuple[nn.Module, list[tuple[Any, Any, Any, float]]] | None:
    """(base layer, [(lora_A, lora_B, dropout, scaling)] of its active adapters) for a layer
    that is plain or a vanilla peft LoRA layer; None for anything else."""
    if isinstance(module, nn.Linear | Int4Linear):
        return module, []
    if not hasattr(module, "base_layer") or not hasattr(module, "lora_A"):
        return None
    if module.disable_adapters or module.merged or getattr(module, "lora_variant", {}):
        return None
    base = module.base_layer
    if not isinstance(base, nn.Linear | Int4Linear):
        return None
    updates = [
        (module.lora_A[a], module.lora_B[a], module.lora_dropout[a], module.scaling[a])
        for a in module.active_adapters
        if a in module.lora_A
    ]
    return base, updates


class _Group:
    """Projections of one input (q, k, v or gate, up): ``__call__`` returns each one's output."""

    def __init__(self, modules: Sequence[nn.Module], fused: Int4Linear | None) -> None:
        self.modules = list(modules)
        self.fused = fused
        self.updates = [(_lora_parts(m) or (m, []))[1] for m in modules]
        self.sizes = [self._out(m) for m in modules]

    @staticmethod
    def _out(module: nn.Module) -> int:
        base = getattr(module, "base_layer", module)
        return int(base.out_features)

    def __call__(self, x: torch.Tensor) -> list[torch.Tensor]:
        if self.fused is None:
            return [m(x) for m in self.modules]
        outs = list(self.fused(x).split(self.sizes, dim=-1))
        for k, updates in enumerate(self.updates):
            for lora_a, lora_b, dropout, scaling in updates:
                h = x.to(lora_a.weight.dtype)
                outs[k] = (outs[k] + lora_b(lora_a(dropout(h))) * scaling).to(outs[k].dtype)
        return outs


class StaticDecoder:
    """Batch decoding steps for one Llama-architecture model (see the module's docstring).
    Fused 4-bit projections are built on first use and kept (the 4-bit base weights never
    change; LoRA weights are read live at every step)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self._fused: dict[tuple[int, ...], tuple[list[nn.Module], Int4Linear]] = {}

    def _fuse(self, modules: Sequence[nn.Module]) -> Int4Linear | None:
        parts = [_lora_parts(m) for m in modules]
        if any(p is None for p in parts):
            return None
        bases = [p[0] for p in parts if p is not None]
        if not concatenable(bases):
            return None
        key = tuple(id(b) for b in bases)
        held = self._fused.get(key)
        if held is None or any(a is not b for a, b in zip(held[0], bases, strict=True)):
            held = (bases, Int4Linear.concat(bases))  # type: ignore[arg-type]
            self._fused[key] = held
        return held[1]

    def _layers(self, body: nn.Module) -> list[tuple[nn.Module, _Group, _Group]]:
        plan = []
        for layer in body.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv = [attn.q_proj, attn.k_proj, attn.v_proj]
            gate_up = [mlp.gate_proj, mlp.up_proj]
            plan.append((layer, _Group(qkv, self._fuse(qkv)), _Group(gate_up, self._fuse(gate_up))))
        return plan

    def start(self, cache: Any, mask: torch.Tensor, steps: int) -> Step:
        """A step function continuing from ``cache`` (a filled ``DynamicCache``, each layer's
        keys and values (rows, kv_heads, columns, head_dim); emptied here, its tensors moved
        into the static cache one layer at a time) with room for ``steps`` more tokens;
        ``mask``: (rows, columns), 1 on the cache's real tokens."""
        causal = _causal_lm(self.model)
        assert causal is not None, "start() on a model static_decoder() refused"
        body, config = causal.model, causal.config
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        scaling = body.layers[0].self_attn.scaling
        plan = self._layers(body)
        rows, columns = mask.shape
        size = columns + steps
        keys: list[torch.Tensor] = []
        values: list[torch.Tensor] = []
        for layer in cache.layers:
            for held, out in ((layer.keys, keys), (layer.values, values)):
                buf = held.new_zeros((rows, held.shape[1], size, head_dim))
                buf[:, :, :columns] = held
                out.append(buf)
            layer.keys = layer.values = None  # the DynamicCache gives its memory back
        visible = torch.zeros((rows, 1, 1, size), dtype=torch.bool, device=mask.device)
        visible[:, 0, 0, :columns] = mask.bool()
        padded = not bool(mask.bool().all())
        filled = columns
        half = head_dim // 2

        def step(token: torch.Tensor, positions: torch.Tensor, _mask: torch.Tensor) -> torch.Tensor:
            nonlocal filled
            if filled >= size:
                raise RuntimeError(f"static KV cache full ({size} columns)")
            column = filled
            at = torch.tensor([column], device=token.device)
            visible[:, 0, 0, column] = True
            x = body.embed_tokens(token[:, None])
            cos, sin = body.rotary_emb(x, positions[:, None])
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            # transformers' rotate_half(x) * sin is [-x2 * s1, x1 * s2]; x rolled by half a head
            # times [-s1, s2] is the same products (negation is exact), in fewer operations.
            sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1)
            attn_mask = visible[..., : column + 1]
            for i, (layer, qkv, gate_up) in enumerate(plan):
                h = _norm(layer.input_layernorm, x)
                q, k, v = (t.view(rows, 1, -1, head_dim).transpose(1, 2) for t in qkv(h))
                qk = torch.cat((q, k), dim=1)  # queries and keys rotated together
                q, k = (qk * cos + qk.roll(half, dims=-1) * sin).split((heads, k.shape[1]), dim=1)
                keys[i].index_copy_(2, at, k)
                values[i].index_copy_(2, at, v)
                k, v = keys[i][:, :, : column + 1], values[i][:, :, : column + 1]
                if padded:  # as transformers: each key/value head's queries as its batch
                    a = F.scaled_dot_product_attention(
                        q.reshape(rows, k.shape[1], -1, head_dim), k, v, attn_mask, scale=scaling
                    )
                else:
                    a = F.scaled_dot_product_attention(q, k, v, scale=scaling, enable_gqa=True)
                x = x + layer.self_attn.o_proj(a.reshape(rows, 1, -1))
                h = _norm(layer.post_attention_layernorm, x)
                gate, up = gate_up(h)
                x = x + layer.mlp.down_proj(layer.mlp.act_fn(gate) * up)
            filled += 1
            return causal.lm_head(_norm(body.norm, x))[:, -1]

        return step


def _norm(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """transformers' Llama RMS norm; in float32 as torch's one fused call (the same result)."""
    weight = getattr(module, "weight", None)
    eps = getattr(module, "variance_epsilon", None)
    if x.dtype == torch.float32 and weight is not None and weight.dtype == torch.float32 and eps:
        return F.rms_norm(x, weight.shape, weight, eps)
    return module(x)


def _causal_lm(model: nn.Module) -> Any | None:
    """The Llama causal LM under ``model`` (a peft wrapper unwrapped), or None."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(inner, "config", None)
    if getattr(config, "model_type", None) != "llama" or not hasattr(inner, "model"):
        return None
    return inner


def static_decoder(model: nn.Module) -> StaticDecoder | None:
    """A :class:`StaticDecoder` for ``model``, or None when it is not a Llama model this covers
    (the caller then steps through transformers)."""
    causal = _causal_lm(model)
    if causal is None:
        return None
    config = causal.config
    if getattr(config, "sliding_window", None) or getattr(config, "attention_dropout", 0.0):
        return None
    for layer in causal.model.layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        names = ("q_proj", "k_proj", "v_proj", "o_proj", "scaling")
        if not all(hasattr(attn, n) for n in names) or not all(
            hasattr(mlp, n) for n in ("gate_proj", "up_proj", "down_proj", "act_fn")
        ):
            return None
    return StaticDecoder(model)
