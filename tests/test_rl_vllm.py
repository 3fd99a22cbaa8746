"""The vLLM rollout generator without a GPU: the install hint where vLLM is missing, and the
LoRA merge its weight sync applies (scripts/gpu_train_check.sh checks generation on a GPU)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import torch

from baselines.rl.core.vllm_generator import VLLMGenerator, lora_pairs, merge_lora, read_safetensors

PEFT = "base_model.model.model.layers.{}.self_attn.{}.lora_{}.default.weight"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_vllm_raises_import_error_with_install_hint(tmp_path):
    with pytest.raises(ImportError, match=r"CUDA GPU.*pip install -e '\.\[gpu\]'"):
        VLLMGenerator(tmp_path / "no-model")


def test_importing_the_module_does_not_import_vllm():
    code = "import sys, baselines.rl.core.vllm_generator; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_lora_pairs_maps_peft_names_to_transformers_names():
    a, b = torch.zeros(2, 4), torch.zeros(4, 2)
    pairs = lora_pairs({PEFT.format(0, "q_proj", "A"): a, PEFT.format(0, "q_proj", "B"): b})
    assert list(pairs) == ["model.layers.0.self_attn.q_proj.weight"]
    assert pairs["model.layers.0.self_attn.q_proj.weight"][0] is a


def test_lora_pairs_rejects_a_lone_adapter_half_and_non_lora_names():
    with pytest.raises(ValueError, match="lora_A and lora_B"):
        lora_pairs({PEFT.format(0, "q_proj", "A"): torch.zeros(2, 4)})
    with pytest.raises(ValueError, match="not a peft LoRA tensor"):
        lora_pairs({"model.layers.0.self_attn.q_proj.weight": torch.zeros(4, 4)})


def test_merge_lora_adds_scaled_b_at_a_without_accumulating_over_syncs():
    gen = torch.Generator().manual_seed(0)
    name = "model.layers.0.self_attn.v_proj.weight"
    base = {name: torch.randn(6, 4, generator=gen)}
    original = base[name].clone()
    a, b = torch.randn(2, 4, generator=gen), torch.randn(6, 2, generator=gen)
    adapters = {PEFT.format(0, "v_proj", "A"): a, PEFT.format(0, "v_proj", "B"): b}
    first = merge_lora(lora_pairs(adapters), base, scale=2.0)
    second = merge_lora(lora_pairs(adapters), base, scale=2.0)
    torch.testing.assert_close(first[name], original + 2.0 * b @ a)
    torch.testing.assert_close(second[name], first[name])
    torch.testing.assert_close(base[name], original)


def test_read_safetensors_reads_only_the_named_tensors_and_rejects_missing_ones(tmp_path):
    from safetensors.torch import save_file

    save_file(
        {"x.weight": torch.ones(2, 2), "y.weight": torch.zeros(3)}, tmp_path / "m.safetensors"
    )
    out = read_safetensors(tmp_path, {"x.weight"})
    assert list(out) == ["x.weight"]
    torch.testing.assert_close(out["x.weight"], torch.ones(2, 2))
    with pytest.raises(ValueError, match=r"z\.weight"):
        read_safetensors(tmp_path, {"z.weight"})
