"""Token-level generation with vLLM's offline engine for the rollout workers (the ``gpu`` extra and
a CUDA GPU).

It follows the :class:`~baselines.rl.core.rollout.Generator` protocol as the torch
:class:`~baselines.rl.core.policy.Policy` does: the same prompt ids, the generated ids (ending
with the end-of-sequence token when the model produced it) and the logprobs of the model's own
distribution at temperature 1. What it relies on in vLLM 0.33:

- ``logprobs_mode="raw_logprobs"`` makes the returned logprobs those of the raw logits, taken
  before temperature and top-p, which is the quantity the trainer recomputes.
- The engine core runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``), so
  ``LLM.apply_model`` calls a function on the model directly. With an engine-core process they
  would go through msgpack, which refuses the function unless pickling is allowed
  (``VLLM_ALLOW_INSECURE_SERIALIZATION=1``) and does not rebuild the tensors.
- The model's ``load_weights`` takes transformers-named tensors and copies each into its
  parameter in place, shard by shard (``q_proj`` into the fused ``qkv_proj``). A subset of the
  weights can therefore be loaded. The prefix cache is reset afterwards because its KV entries
  came from the old weights.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from baselines.rl.core.policy import LoraOptions, encode_prompt, load_tokenizer
from benchmark.llm.base import Sampling

_LORA_NAME = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<ab>[AB])\.[^.]+\.weight$")


def lora_pairs(adapters: dict[str, torch.Tensor]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Group peft adapter tensors by the base weight they adapt.

    Args:
        adapters: peft names: ``base_model.model.<module>.lora_A.<adapter>.weight`` (r, in) and
            ``...lora_B...`` (out, r).

    Returns:
        ``<module>.weight`` (the transformers name) mapped to (A, B).
    """
    parts: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in adapters.items():
        match = _LORA_NAME.match(name)
        if match is None:
            raise ValueError(f"{name!r} is not a peft LoRA tensor (...lora_A/lora_B...weight)")
        parts.setdefault(f"{match['module']}.weight", {})[match["ab"]] = tensor
    incomplete = sorted(n for n, ab in parts.items() if set(ab) != {"A", "B"})
    if incomplete:
        raise ValueError(
            f"lora_A and lora_B must be synced together; one is missing for {incomplete[:5]}"
        )
    return {n: (ab["A"], ab["B"]) for n, ab in parts.items()}


def merge_lora(
    pairs: dict[str, tuple[torch.Tensor, torch.Tensor]],
    base: dict[str, torch.Tensor],
    scale: float,
) -> dict[str, torch.Tensor]:
    """``W + scale * B @ A`` for each adapted weight. ``base`` is left unchanged, so merging the
    next sync starts from the original weights again. ``scale`` is LoRA's ``alpha / r``."""
    return {
        name: base[name] + scale * (b.to(base[name]) @ a.to(base[name]))
        for name, (a, b) in pairs.items()
    }


def read_safetensors(model_dir: Path, names: set[str]) -> dict[str, torch.Tensor]:
    """The tensors called ``names`` from the ``*.safetensors`` files of ``model_dir``."""
    from safetensors import safe_open

    out: dict[str, torch.Tensor] = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(path), framework="pt") as f:
            for name in names & set(f.keys()):
                out[name] = f.get_tensor(name)
    missing = sorted(names - out.keys())
    if missing:
        raise ValueError(f"{model_dir} has no safetensors weights named {missing[:5]}")
    return out


class VLLMGenerator:
    """A transformers model directory served by vLLM, mirroring the trainer's weights.

    Args:
        model_dir: a transformers model directory (config, safetensors weights, tokenizer).
        lora: the trainer's LoRA options. Synced weights are then the peft adapters, which are
            merged here into the base weights from ``model_dir``.
        gpu_memory_utilization: fraction of the GPU's memory vLLM takes (weights and KV cache).
            The rest is left to the trainer, which may share the GPU.
        dtype: dtype of the weights and activations. ``float32`` matches the trainer's logprobs.
    """

    def __init__(
        self,
        model_dir: str | Path,
        lora: LoraOptions | None = None,
        gpu_memory_utilization: float = 0.3,
        dtype: str = "float32",
    ) -> None:
        try:
            from vllm import LLM
        except ImportError as err:
            raise ImportError(
                "VLLMGenerator (policy.generator=vllm) needs vLLM and a CUDA GPU: install the "
                f"gpu extra with pip install -e '.[gpu]' (see scripts/gpu_check.sh) ({err})"
            ) from err
        self.model_dir = Path(model_dir)
        self.lora = lora
        self.tokenizer = load_tokenizer(self.model_dir)
        # Read when the engine starts: apply_model needs the engine core in this process.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        self.llm = LLM(
            model=str(self.model_dir),
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            logprobs_mode="raw_logprobs",
        )
        self._base: dict[str, torch.Tensor] = {}

    def encode(self, text: str) -> list[int]:
        return encode_prompt(self.tokenizer, text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def generate(
        self, prompts: list[list[int]], sampling: Sampling
    ) -> list[tuple[list[int], list[float]]]:
        """Complete each prompt; returns (generated ids, their logprobs) per prompt.

        Sampling is seeded by ``sampling.seed``. Each prompt gets its own seed derived from it,
        because vLLM seeds a generator per request. Seeded samples therefore differ from the
        torch policy's. Greedy ids (``temperature=0``) are the same.
        """
        if not prompts:
            return []
        from vllm import SamplingParams, TokensPrompt

        params = [
            SamplingParams(
                max_tokens=sampling.max_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                seed=hash((sampling.seed, k)) % 2**63,
                logprobs=0,
                detokenize=False,
            )
            for k in range(len(prompts))
        ]
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False
        )
        result = []
        for out in outputs:
            completion = out.outputs[0]
            ids = list(completion.token_ids)
            logprobs = [completion.logprobs[k][t].logprob for k, t in enumerate(ids)]
            result.append((ids, logprobs))
        return result

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Mirror the trainer's weights. Without LoRA these are transformers-named tensors.
        With LoRA they are the peft adapters, and the weights loaded are merged from the
        original base weights."""
        if self.lora is not None:
            pairs = lora_pairs(weights)
            self._base.update(read_safetensors(self.model_dir, pairs.keys() - self._base.keys()))
            weights = merge_lora(pairs, self._base, self.lora.alpha / self.lora.r)
        items = list(weights.items())
        self.llm.apply_model(lambda model: model.load_weights(items))
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("vLLM did not reset its prefix cache after a weight update")
