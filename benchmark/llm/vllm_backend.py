"""The ``vllm`` backend: in-process ``vllm.LLM`` on GPUs (the ``gpu`` extra).

Importing this module never imports vllm; constructing the backend does, and fails with a clear
message where vllm (or a GPU) is missing.

Constraints use vLLM's structured outputs (``SamplingParams.structured_outputs =
StructuredOutputsParams(json=schema, disable_any_whitespace=True)``, vLLM >= 0.12), one
``SamplingParams`` per chat so constrained and free chats share one batched ``chat`` call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.llm.base import Chat, Constraint, Generation, Sampling, Usage, per_chat


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


class VLLMBackend:
    """A model directory served in-process by vLLM."""

    def __init__(
        self, model_dir: str | Path, name: str | None = None, **engine_kwargs: object
    ) -> None:
        try:
            from vllm import LLM
        except ImportError as err:
            raise RuntimeError(
                "the vllm backend needs the 'gpu' extra (pip install -e '.[gpu]') and a CUDA GPU; "
                f"on CPU use llm=smollm2, llm=hf or llm=openai ({err})"
            ) from err
        self.engine = LLM(model=str(model_dir), **engine_kwargs)
        self.tokenizer = self.engine.get_tokenizer()
        self.name = name or Path(model_dir).name
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
        outputs = self.engine.chat(chats, params, use_tqdm=False)
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

    def score(self, prompt: Chat, candidates: list[str]) -> list[float]:
        from vllm import SamplingParams

        head = self.tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
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
