"""4-bit weights for the ``hf`` backend on CPU: the decoder's linear layers in groups of 32.

Decoding one token at a time is bound by reading the weights: SmolLM2-135M's float32 linear
layers are 0.43 GB, read once per token. ``llm.options.dtype=int4`` stores each linear layer of
the decoder as 4-bit levels in groups of 32 inputs with a scale and a zero per group (torch's
``_weight_int4pack_mm_for_cpu`` layout), an eighth of those bytes, and multiplies in bfloat16.

The embedded model is distributed as a GGUF file of exactly that form (Q4_1: per block of 32
weights a scale ``d`` and a minimum ``m``, each weight ``d * q + m`` with ``q`` in 0..15); its
float32 copy holds those dequantised values, so :func:`pack` recovers every block's ``d``, ``m``
and levels from them, and the 4-bit layer holds the file's own weights (up to the scales' and
zeros' rounding to bfloat16, and bfloat16 activations). A layer whose weights are not on such a
grid (another model, or an adapter merged in) is quantised the same way, with the error that
brings: :class:`Int4Linear` records the largest difference from the float32 weights in
``max_error``. An adapter is therefore kept beside the 4-bit base layer (peft's LoRA layers
around it), not merged in. The embeddings stay as they are. The output projection (SmolLM2's
49,152 x 576, tied to the embeddings) would otherwise be about half of what a token reads: it
gets its own copy in 8 bits, one symmetric scale per output row (:class:`Int8Head`, torch's
``_weight_int8pack_mm``; the GGUF file keeps it in 8 bits too, Q8_0). On one thread this
raised SmolLM2's batch-1 decoding from 71 to 84-87 tokens/s against a bfloat16 head, with the
same greedy text on the bench's prompt.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

GROUP = 32  # inputs per group (GGUF's Q4_1 block)
LEVELS = 15  # q in 0..15
# The CPU kernel packs output rows in blocks of 64: layers concatenate exactly (their packed rows
# side by side) only when each one's output rows fill whole blocks.
ROW_BLOCK = 64
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def available() -> bool:
    """Whether this torch build has the CPU 4-bit kernels."""
    return all(
        hasattr(torch, k)
        for k in (
            "_weight_int4pack_mm_for_cpu",
            "_convert_weight_to_int4pack_for_cpu",
            "_weight_int8pack_mm",
        )
    )


class Int4Linear(nn.Module):
    """A linear layer (no bias) with 4-bit weights in groups of ``GROUP`` inputs."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        out_features, in_features = weight.shape
        if in_features % GROUP:
            raise ValueError(
                f"int4 needs inputs in groups of {GROUP}; this layer has {in_features}"
            )
        self.in_features, self.out_features = in_features, out_features
        packed, scales_zeros, error = pack(weight.detach().float())
        self.register_buffer("packed", packed)
        self.register_buffer("scales_zeros", scales_zeros)
        self.register_buffer("bias", None if bias is None else bias.detach().clone())
        self.max_error = error

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, self.in_features).to(torch.bfloat16)
        out = torch._weight_int4pack_mm_for_cpu(flat, self.packed, GROUP, self.scales_zeros)
        out = out.to(x.dtype).reshape(*shape[:-1], self.out_features)
        return out if self.bias is None else out + self.bias

    @classmethod
    def concat(cls, layers: list[Int4Linear]) -> Int4Linear:
        """One layer computing ``layers``' outputs side by side (of the same inputs, no bias,
        output rows in whole blocks of ``ROW_BLOCK``): their packed rows, scales and zeros
        concatenated. The kernel computes each output row alone, so each slice of the result
        equals that layer's own output."""
        if not concatenable(layers):
            raise ValueError(
                f"Int4Linear.concat needs layers of one input size, no bias and outputs in "
                f"multiples of {ROW_BLOCK}; got {[(x.out_features, x.in_features) for x in layers]}"
            )
        fused = cls.__new__(cls)
        nn.Module.__init__(fused)
        fused.in_features = layers[0].in_features
        fused.out_features = sum(layer.out_features for layer in layers)
        fused.register_buffer("packed", torch.cat([layer.packed for layer in layers]))
        fused.register_buffer(
            "scales_zeros", torch.cat([layer.scales_zeros for layer in layers], dim=1)
        )
        fused.register_buffer("bias", None)
        fused.max_error = max(layer.max_error for layer in layers)
        return fused


def concatenable(layers: list[Any]) -> bool:
    """Whether :meth:`Int4Linear.concat` can join ``layers``."""
    return (
        all(isinstance(x, Int4Linear) and x.bias is None for x in layers)
        and len({x.in_features for x in layers}) == 1
        and all(x.out_features % ROW_BLOCK == 0 for x in layers)
    )


def pack(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(packed levels, scales and zeros (groups, out, 2) in bfloat16, the largest absolute
    difference of the dequantised weights from ``weight``) for a float32 ``weight`` (out, in)."""
    out_features, in_features = weight.shape
    blocks = weight.reshape(out_features, in_features // GROUP, GROUP)
    low = blocks.amin(dim=-1)
    step = (blocks.amax(dim=-1) - low) / LEVELS
    safe = torch.where(step > 0, step, torch.ones_like(step))
    levels = ((blocks - low[..., None]) / safe[..., None]).round().clamp(0, LEVELS)
    # The kernel dequantises a level q as (q - 8) * scale + zero.
    scale, zero = step.to(torch.bfloat16), (low + 8 * step).to(torch.bfloat16)
    restored = (levels - 8) * scale.float()[..., None] + zero.float()[..., None]
    error = float((restored - blocks).abs().max())
    q = levels.reshape(out_features, in_features).to(torch.int32)
    packed = torch._convert_weight_to_int4pack_for_cpu(q, 1)
    scales_zeros = torch.stack([scale.t(), zero.t()], dim=-1).contiguous()
    return packed, scales_zeros, error


def quantize(model: Any) -> dict[str, float]:
    """Put ``model``'s decoder projections in 4 bits (in place; under peft's LoRA layers their
    base layers) and its output projection in 8 bits (:class:`Int8Head`). The largest weight
    error per kind of projection."""
    if not available():
        raise ValueError("llm.options.dtype=int4 needs torch's CPU int4 kernels (torch >= 2.6)")
    errors: dict[str, float] = {}
    for name, module in list(model.named_modules()):
        leaf = name.rsplit(".", 1)[-1]
        if leaf not in PROJECTIONS:
            continue
        holder, attr = (module, "base_layer") if hasattr(module, "base_layer") else (None, None)
        if holder is None:
            parent = model.get_submodule(name.rsplit(".", 1)[0])
            holder, attr, linear = parent, leaf, module
        else:
            linear = module.base_layer
        if not isinstance(linear, nn.Linear):
            continue
        layer = Int4Linear(linear.weight, linear.bias)
        setattr(holder, attr, layer)
        errors[leaf] = max(errors.get(leaf, 0.0), layer.max_error)
    head = model.get_output_embeddings()
    if head is not None:
        model.set_output_embeddings(Int8Head(head.weight, head.bias))
        # The head now has its own (8-bit) copy: tying it back to the embeddings would
        # replace it with the float32 table, or fail on its read-only weight.
        model.config.tie_word_embeddings = False
        if getattr(model.config, "get_text_config", None):
            model.config.get_text_config().tie_word_embeddings = False
    return errors


class Int8Head(nn.Module):
    """The output projection with 8-bit weights, one symmetric scale per output row (in
    bfloat16), multiplied in bfloat16; its logits handed back in float32."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        w = weight.detach().float()
        # The levels are taken against the scales as stored (bfloat16), so that every weight
        # is within half a step of its dequantised value.
        scales = (w.abs().amax(dim=1) / 127).clamp_min(1e-30).to(torch.bfloat16)
        levels = (w / scales.float()[:, None]).round().clamp(-127, 127)
        self.register_buffer("qweight", levels.to(torch.int8))
        self.register_buffer("scales", scales)
        self.register_buffer("bias", None if bias is None else bias.detach().float().clone())

    @property
    def weight(self) -> torch.Tensor:
        """The dequantised weights (float32), computed when asked for."""
        return self.qweight.float() * self.scales.float()[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(torch.bfloat16)
        out = torch._weight_int8pack_mm(flat, self.qweight, self.scales).float()
        out = out.reshape(*x.shape[:-1], self.out_features)
        return out if self.bias is None else out + self.bias
