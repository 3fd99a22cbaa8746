"""The ``vllm`` backend: a model served in-process by ``vllm.LLM``, on a GPU (the ``gpu`` extra)
or on CPU (vLLM's CPU build, in the ``.venv-vllm`` environment that ``scripts/vllm_env.sh``
builds).

Importing this module never imports vllm; constructing the backend does, and fails with a clear
message where vllm is missing.

Constraints use vLLM's structured outputs (``SamplingParams.structured_outputs =
StructuredOutputsParams(json=schema, disable_any_whitespace=True)``, vLLM >= 0.12), one
``SamplingParams`` per chat so constrained and free chats share one batched ``chat`` call. A
request vLLM refuses because of its schema raises :class:`~benchmark.llm.base.ConstraintError`
naming the constraints, as the ``hf`` backend does for a schema llguidance cannot compile.

The engine gets :data:`DEFAULTS` (llguidance, compact JSON under a schema) and, on a CPU build,
:data:`CPU_DEFAULTS`; ``llm.options`` overrides any of them. Without an explicit KV-cache size
vLLM's CPU build asks for 90% of the machine's memory and refuses to start when that much is not
free. vLLM runs the float32 SmolLM2 copy in bfloat16 on CPU (its default
there); a precision other than float32 is part of the backend's name, as on ``hf``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.llm.base import (
    Chat,
    Constraint,
    ConstraintError,
    Generation,
    Sampling,
    Usage,
    per_chat,
)
from benchmark.llm.prefix_cache import template_ids

# Engine arguments everywhere, unless llm.options sets them: schemas compiled by llguidance (the
# engine the hf backend uses) into compact JSON. vLLM (0.32) takes disable_any_whitespace from
# the engine's structured-outputs config only (the request's own flag is ignored), and only with
# a named backend; without it the model spends about half its tokens on indentation.
DEFAULTS: dict[str, Any] = {
    "structured_outputs_config": {"backend": "guidance", "disable_any_whitespace": True}
}
# Engine arguments on vLLM's CPU build, unless llm.options sets them: eager execution (no
# torch.compile of the model at start), 1 GiB of KV cache (about 46k tokens of SmolLM2-135M in
# bfloat16) and a 4,096-token context.
CPU_DEFAULTS: dict[str, Any] = {
    "enforce_eager": True,
    "kv_cache_memory_bytes": 1 << 30,
    "max_model_len": 4096,
}


def sampling_params(sampling: Sampling, constraint: Constraint | None) -> dict[str, Any]:
    """The keyword arguments of ``vllm.SamplingParams`` for ``sampling`` under ``constraint``
    (``structured_outputs`` holds the ``StructuredOutputsParams`` keyword arguments)."""
    params: dict[str, Any] = {
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "seed": sampling.seed,
        "stop": list(sampling.stop) or None,
        "logprobs": 0,
    }
    if constraint is not None:
        params["stop"] = None  # the schema decides where the text ends
        params["structured_outputs"] = {
            "json": dict(constraint.schema),
            "disable_any_whitespace": True,
        }
    return params


def _refusals() -> tuple[type[Exception], ...]:
    """The exceptions vLLM raises for a request it refuses (its validation errors)."""
    try:
        from vllm.exceptions import VLLMClientError
    except ImportError:  # versions before vllm.exceptions raised ValueError
        return (ValueError,)
    return (VLLMClientError, ValueError)


def engine_kwargs(options: dict[str, Any], on_cpu: bool) -> dict[str, Any]:
    """The ``vllm.LLM`` keyword arguments for ``options`` (``llm.options``): :data:`DEFAULTS`
    and, on CPU, :data:`CPU_DEFAULTS` under them."""
    return {**DEFAULTS, **(CPU_DEFAULTS if on_cpu else {}), **options}


class VLLMBackend:
    """A model directory served in-process by vLLM."""

    def __init__(
        self, model_dir: str | Path, name: str | None = None, **engine_options: Any
    ) -> None:
        try:
            from vllm import LLM
            from vllm.platforms import current_platform
        except ImportError as err:
            raise RuntimeError(
                "the vllm backend needs vLLM: on a CUDA GPU the 'gpu' extra "
                "(pip install -e '.[gpu]'), on CPU the .venv-vllm environment "
                "(bash scripts/vllm_env.sh; run the benchmark with .venv-vllm/bin/python); "
                f"without vLLM use llm=smollm2, llm=hf or llm=openai ({err})"
            ) from err
        self.on_cpu = bool(current_platform.is_cpu())
        self.engine = LLM(model=str(model_dir), **engine_kwargs(engine_options, self.on_cpu))
        self.tokenizer = self.engine.get_tokenizer()
        dtype = str(self.engine.llm_engine.model_config.dtype).removeprefix("torch.")
        self.dtype = dtype
        name = name or Path(model_dir).name
        self.name = name if dtype == "float32" else f"{name}@{dtype}"
        self.usage = Usage()

    def generate(
        self,
        chats: list[Chat],
        sampling: Sampling,
        constraints: Sequence[Constraint | None] | None = None,
    ) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        start = time.perf_counter()
        wanted = per_chat(constraints, len(chats))
        params = []
        for c in wanted:
            kwargs = sampling_params(sampling, c)
            if "structured_outputs" in kwargs:
                kwargs["structured_outputs"] = StructuredOutputsParams(
                    **kwargs["structured_outputs"]
                )
            params.append(SamplingParams(**kwargs))
        try:
            outputs = self.engine.chat(chats, params, use_tqdm=False)
        except _refusals() as err:
            names = sorted({c.name for c in wanted if c is not None})
            if not names:
                raise
            raise ConstraintError(
                f"vLLM refused a request under constraints {names}: {err}"
            ) from err
        gens = []
        for o, constraint in zip(outputs, wanted, strict=True):
            c = o.outputs[0]
            logprobs = [lp[t].logprob for t, lp in zip(c.token_ids, c.logprobs or [], strict=False)]
            gens.append(
                Generation(
                    c.text,
                    list(c.token_ids),
                    logprobs,
                    list(o.prompt_token_ids),
                    c.finish_reason or "stop",
                    constrained=constraint is not None,
                )
            )
        self.usage.add(gens, 1000 * (time.perf_counter() - start))
        return gens

    def close(self) -> None:
        """Stop vLLM's engine processes now (otherwise they stop when this process exits)."""
        core = getattr(getattr(self.engine, "llm_engine", None), "engine_core", None)
        if core is not None:
            core.shutdown()

    def score(self, prompt: Chat, candidates: list[str]) -> list[float]:
        from vllm import SamplingParams

        if not candidates:
            return []
        head = template_ids(self.tokenizer, prompt, generation_prompt=True)
        prompts = [
            {"prompt_token_ids": head + self.tokenizer.encode(c, add_special_tokens=False)}
            for c in candidates
        ]
        params = SamplingParams(max_tokens=1, prompt_logprobs=0)
        out = []
        for o in self.engine.generate(prompts, params, use_tqdm=False):
            ids = o.prompt_token_ids
            out.append(
                float(sum(o.prompt_logprobs[k][ids[k]].logprob for k in range(len(head), len(ids))))
            )
        return out
