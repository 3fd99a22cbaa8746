"""Decoding over a static KV cache (benchmark/llm/static_decode.py) gives transformers' own
tokens and logprobs, bit for bit: in float32 and in 4 bits with fused projections, with a LoRA
adapter beside the 4-bit layers, on a left-padded batch, greedy and sampled; models it does not
cover step through transformers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from benchmark.llm.base import Sampling
from benchmark.llm.hf import HFBackend
from benchmark.llm.int4 import Int4Linear, available

# Three prompts of different lengths: the batch is left-padded.
CHATS = [
    [{"role": "user", "content": "pick up the apple"}],
    [{"role": "user", "content": "navigate to the fridge, open it and put the tomato inside"}],
    [{"role": "system", "content": "say all"}, {"role": "user", "content": "explore"}],
]


def _same_generations(a: HFBackend, b: HFBackend, sampling: Sampling) -> None:
    got, want = a.generate(CHATS, sampling), b.generate(CHATS, sampling)
    for g, w in zip(got, want, strict=True):
        assert g.token_ids == w.token_ids
        assert g.logprobs == w.logprobs  # exact: the same operations in the same order
    assert sum(len(g.token_ids) for g in got) > 12  # text to compare, not three stops


def _pair(model: Path, **options: object) -> tuple[HFBackend, HFBackend]:
    static = HFBackend(model, prefix_cache=0, **options)  # type: ignore[arg-type]
    plain = HFBackend(model, prefix_cache=0, static_decode=False, **options)  # type: ignore[arg-type]
    assert static.static is not None and plain.static is None
    return static, plain


@pytest.mark.parametrize(
    "sampling", [Sampling(max_tokens=12), Sampling(max_tokens=12, temperature=1.0, seed=3)]
)
def test_float32_static_decoding_equals_transformers(tiny_model: Path, sampling: Sampling) -> None:
    static, plain = _pair(tiny_model)
    _same_generations(static, plain, sampling)


@pytest.mark.skipif(not available(), reason="this torch has no CPU int4 kernels")
def test_int4_with_an_adapter_fuses_projections_and_equals_transformers(
    tiny_model: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    from baselines.rl.core.policy import LoraOptions, Policy
    from benchmark.llm.adapters import save_adapter
    from benchmark.llm.tiny import save_tiny_llama

    # Projections of 128 and 64 outputs: whole blocks of the kernel's 64 rows, so they fuse.
    model = save_tiny_llama(
        tmp_path / "wide", AutoTokenizer.from_pretrained(tiny_model), hidden=128, heads=2
    )
    policy = Policy(model, lora=LoraOptions(r=4, alpha=8))
    for p in policy.parameters():
        if p.requires_grad:
            nn.init.normal_(p, std=0.5)  # a trained-looking adapter, large enough to matter
    saved = save_adapter(policy.model, tmp_path / "adapter", model.name)
    static, plain = _pair(model, dtype="int4", adapter=saved)
    for sampling in (Sampling(max_tokens=12), Sampling(max_tokens=12, temperature=1.0, seed=5)):
        _same_generations(static, plain, sampling)
    # Each layer's q/k/v and gate/up were fused (2 layers x 2 groups), LoRA layers among them.
    assert static.static is not None and len(static.static._fused) == 4
    assert any(hasattr(m, "lora_A") for m in static.model.modules())
    # The adapter is live at every step: without it the text changes.
    bare = HFBackend(model, prefix_cache=0, dtype="int4")
    assert [g.token_ids for g in bare.generate(CHATS, Sampling(max_tokens=12))] != [
        g.token_ids for g in static.generate(CHATS, Sampling(max_tokens=12))
    ]


@pytest.mark.skipif(not available(), reason="this torch has no CPU int4 kernels")
def test_concatenated_int4_layers_compute_each_layer_exactly() -> None:
    torch.manual_seed(0)
    layers = [Int4Linear(torch.randn(n, 64) * 0.1) for n in (64, 128, 192)]
    fused = Int4Linear.concat(layers)
    x = torch.randn(3, 64)
    for part, layer in zip(fused(x).split([64, 128, 192], dim=-1), layers, strict=True):
        assert torch.equal(part, layer(x))
    # The kernel packs rows in blocks of 64: a layer of 32 rows cannot be joined exactly.
    for bad in ([layers[0], Int4Linear(torch.randn(64, 96))], [Int4Linear(torch.randn(32, 64))]):
        with pytest.raises(ValueError, match="multiples of 64"):
            Int4Linear.concat(bad)


def test_other_architectures_step_through_transformers(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4)
    GPT2LMHeadModel(config).save_pretrained(tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    backend = HFBackend(tmp_path / "gpt2", prefix_cache=0)
    assert backend.static is None
    gens = backend.generate(CHATS, Sampling(max_tokens=6))
    assert len(gens) == 3 and all(len(g.token_ids) <= 6 for g in gens)
    assert all(lp <= 0 for g in gens for lp in g.logprobs)


def test_a_full_static_cache_is_an_error_not_a_silent_overwrite(tiny_model: Path) -> None:
    from transformers import DynamicCache

    backend = HFBackend(tiny_model, prefix_cache=0)
    assert backend.static is not None
    ids = torch.tensor([[5, 6, 7]])
    cache = DynamicCache(config=backend.model.config)
    backend.model(input_ids=ids, cache=cache, use_cache=True)
    step = backend.static.start(cache, torch.ones_like(ids), steps=1)
    step(torch.tensor([8]), torch.tensor([3]), torch.ones((1, 4), dtype=torch.long))
    with pytest.raises(RuntimeError, match="static KV cache full"):
        step(torch.tensor([9]), torch.tensor([4]), torch.ones((1, 5), dtype=torch.long))
