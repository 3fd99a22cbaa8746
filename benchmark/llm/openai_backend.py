"""The ``openai`` backend: any OpenAI-compatible server (``vllm serve``, or
``python -m benchmark.llm.serve``) through the official ``openai`` client.

Requests run concurrently (``concurrency`` threads) with the client's timeout and retries.
Token ids come from servers that return them (this benchmark's server and vLLM with
``return_tokens_as_token_ids``); otherwise they are left empty.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from benchmark.llm.base import Chat, Generation, Sampling, Usage
from benchmark.llm.cache import ResponseCache, cache_key


def _token_id(token: str) -> int | None:
    return int(token.split(":", 1)[1]) if token.startswith("token_id:") else None


class OpenAIBackend:
    """Chat completions with logprobs; scoring through completions with ``echo``."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "EMPTY",
        timeout: float = 60.0,
        max_retries: int = 2,
        concurrency: int = 8,
        cache: ResponseCache | None = None,
    ) -> None:
        from openai import OpenAI

        self.client = OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
        )
        self.name = model
        self.concurrency = concurrency
        self.cache = cache
        self.usage = Usage()

    def _one(self, chat: Chat, sampling: Sampling) -> Generation:
        key = cache_key(self.name, chat, sampling.key())
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return Generation(**hit, cached=True)
        resp = self.client.chat.completions.create(
            model=self.name,
            messages=chat,
            max_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            stop=list(sampling.stop) or None,
            logprobs=True,
            extra_body={"return_tokens_as_token_ids": True},
        )
        choice = resp.choices[0]
        content = (choice.logprobs.content if choice.logprobs else None) or []
        ids = [_token_id(t.token) for t in content]
        prompt_ids = list(getattr(resp, "prompt_token_ids", None) or [])
        gen = Generation(
            text=choice.message.content or "",
            token_ids=[i for i in ids if i is not None] if all(i is not None for i in ids) else [],
            logprobs=[t.logprob for t in content],
            prompt_ids=prompt_ids,
            finish_reason=choice.finish_reason or "stop",
            prompt_token_count=-1 if prompt_ids or not resp.usage else resp.usage.prompt_tokens,
        )
        if self.cache is not None:
            self.cache.put(key, gen.to_json())
        return gen

    def generate(self, chats: list[Chat], sampling: Sampling) -> list[Generation]:
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(chats)))) as pool:
            out = list(pool.map(lambda c: self._one(c, sampling), chats))
        self.usage.add(out, 1000 * (time.perf_counter() - start))
        return out

    def score(self, prompt: Chat, candidates: list[str]) -> list[float]:
        out = []
        for cand in candidates:
            resp = self.client.completions.create(
                model=self.name,
                prompt="",
                max_tokens=1,
                echo=True,
                logprobs=0,
                extra_body={"chat": prompt, "candidate": cand},
            )
            out.append(float(sum(resp.choices[0].logprobs.token_logprobs or [])))
        return out
