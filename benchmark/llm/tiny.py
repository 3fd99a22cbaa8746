"""Tiny, randomly initialised Llama models for plumbing tests and throughput baselines."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

PAD, EOS = "<pad>", "<eos>"


def train_tokenizer(corpus: Iterable[str], vocab_size: int = 1000) -> Any:
    """A byte-level BPE tokenizer trained on ``corpus``, with ``<pad>`` and ``<eos>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[PAD, EOS],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD)


def save_tiny_llama(
    out_dir: str | Path,
    tokenizer: Any,
    hidden: int = 32,
    layers: int = 2,
    seed: int = 0,
    heads: int = 4,
    max_positions: int = 2048,
    tie_embeddings: bool = False,
) -> Path:
    """Write a random ``hidden``-wide, ``layers``-deep Llama and ``tokenizer`` to ``out_dir``
    (``tie_embeddings``: its output projection is its input embeddings, as in SmolLM2)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=max_positions,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=tie_embeddings,
    )
    out = Path(out_dir)
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
