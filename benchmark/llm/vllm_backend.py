"""The ``vllm`` backend: in-process ``vllm.LLM`` on GPUs (the ``gpu`` extra).

Importing this module never imports vllm; constructing the backend does, and fails with a clear
message where vllm (or a GPU) is missing.
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmark.llm.base import Chat, Generation, Sampling, Usage


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

    def generate(self, chats: list[Chat], sampling: Sampling) -> list[Generation]:
        from vllm import SamplingParams

        start = time.perf_counter()
        params = SamplingParams(
            max_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            stop=list(sampling.stop) or None,
            logprobs=0,
        )
        outputs = self.engine.chat(chats, params, use_tqdm=False)
        gens = []
        for o in outputs:
            c = o.outputs[0]
            logprobs = [lp[t].logprob for t, lp in zip(c.token_ids, c.logprobs or [], strict=False)]
            gens.append(
                Generation(
                    c.text,
                    list(c.token_ids),
                    logprobs,
                    list(o.prompt_token_ids),
                    c.finish_reason or "stop",
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
