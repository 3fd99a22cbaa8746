"""Tiny, randomly initialised Llama models for plumbing tests and throughput baselines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def save_tiny_llama(
    out_dir: str | Path, tokenizer: Any, hidden: int = 32, layers: int = 2, seed: int = 0
) -> Path:
    """Write a random ``hidden``-wide, ``layers``-deep Llama and ``tokenizer`` to ``out_dir``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    out = Path(out_dir)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
