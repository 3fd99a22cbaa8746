"""4-bit decoder weights for the hf backend: the Q4_1 grid recovered from its dequantised
values, layers that compute what their float32 weights do (to bfloat16's resolution), and an
adapter kept beside the 4-bit base layers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from benchmark.llm.base import Sampling
from benchmark.llm.hf import HFBackend
from benchmark.llm.int4 import GROUP, Int4Linear, Int8Head, available

pytestmark = pytest.mark.skipif(not available(), reason="this torch has no CPU int4 kernels")


def _on_grid(out_features: int, in_features: int) -> torch.Tensor:
    """Weights as a Q4_1 file holds them: per block of 32, d * q + m with q in 0..15 (both
    ends used), d and m representable in bfloat16."""
    torch.manual_seed(0)
    q = torch.randint(0, 16, (out_features, in_features // GROUP, GROUP)).float()
    q[..., 0], q[..., 1] = 0, 15
    d = (torch.rand(out_features, in_features // GROUP, 1) * 0.05).bfloat16().float()
    m = -8 * d  # a zero point (m + 8 d) of 0, exact in bfloat16
    return (d * q + m).reshape(out_features, in_features)


def test_weights_on_the_q4_grid_are_recovered_exactly_and_computed_to_bf16_resolution() -> None:
    weight = _on_grid(64, 128)
    layer = Int4Linear(weight)
    assert layer.max_error < 1e-6  # the levels, scales and zeros of the file, recovered
    x = torch.randn(5, 128)
    expected = x @ weight.t()
    got = layer(x)
    assert got.dtype == torch.float32 and got.shape == (5, 64)
    assert torch.allclose(got, expected, atol=0.05 * expected.abs().max().item())
    # Off the grid (an adapter merged in), the error is recorded.
    assert Int4Linear(weight + 1e-3 * torch.randn_like(weight)).max_error > 1e-4
    with pytest.raises(ValueError, match="groups of 32"):
        Int4Linear(torch.randn(8, 40))


def test_an_int4_backend_generates_and_keeps_an_adapter_unmerged(
    tiny_model: Path, tmp_path: Path
) -> None:
    from baselines.rl.core.policy import LoraOptions, Policy
    from benchmark.llm.adapters import save_adapter

    chats = [[{"role": "user", "content": "pick up the apple"}]]
    full, small = HFBackend(tiny_model), HFBackend(tiny_model, dtype="int4")
    assert small.name == f"{full.name}@int4"
    assert not any(
        isinstance(m, nn.Linear)
        and m.weight.shape[1] % GROUP == 0
        and m.weight.dtype == torch.float32
        for n, m in small.model.model.layers.named_modules()
    )
    out = small.generate(chats, Sampling(max_tokens=8))[0]
    assert out.token_ids and all(lp <= 0 for lp in out.logprobs)
    policy = Policy(tiny_model, lora=LoraOptions(r=4, alpha=8))
    for p in policy.parameters():
        nn.init.normal_(p, std=0.5)  # a trained-looking adapter
    saved = save_adapter(policy.model, tmp_path / "adapter", tiny_model.name)
    adapted = HFBackend(tiny_model, dtype="int4", adapter=saved)
    lora = [m for m in adapted.model.modules() if hasattr(m, "lora_A")]
    assert lora and all(isinstance(m.base_layer, Int4Linear) for m in lora)
    assert adapted.generate(chats, Sampling(max_tokens=8))[0].token_ids


def test_a_tied_output_projection_stays_8_bit_when_weights_are_tied_again(
    tiny_model: Path, tmp_path: Path
) -> None:
    """SmolLM2 ties its output projection to its embeddings; int4 gives the head its own
    8-bit copy, which a later ``tie_weights`` (peft calls it) must leave alone."""
    from transformers import AutoTokenizer

    from benchmark.llm.tiny import save_tiny_llama

    tied = save_tiny_llama(
        tmp_path / "tied", AutoTokenizer.from_pretrained(tiny_model), tie_embeddings=True
    )
    small = HFBackend(tied, dtype="int4")
    chats = [[{"role": "user", "content": "pick up the apple"}]]
    out = small.generate(chats, Sampling(max_tokens=8))[0]
    small.model.tie_weights()
    head = small.model.get_output_embeddings()
    assert isinstance(head, Int8Head) and head.qweight.dtype == torch.int8
    # Its dequantised weights are the embeddings to 8 bits per row: within half a step.
    table = small.model.get_input_embeddings().weight.float()
    step = head.scales.float()[:, None]
    assert ((head.weight - table).abs() <= 0.5 * step + 1e-9).all()
    assert (step > 0).all() and float(step.max()) < float(table.abs().max()) / 100
    assert small.generate(chats, Sampling(max_tokens=8))[0].token_ids == out.token_ids
