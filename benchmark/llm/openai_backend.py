"""The ``openai`` backend: any OpenAI-compatible server (``vllm serve``, or
``python -m benchmark.llm.serve``) through the official ``openai`` client.

Requests run concurrently (``concurrency`` threads) with the client's timeout and retries.
Token ids come from servers that return them (this benchmark's server and vLLM with
``return_tokens_as_token_ids``); otherwise they are left empty.

Logprobs are asked for with ``top_logprobs=0`` beside ``logprobs=true``: llama.cpp's server
(llama-cpp-python) returns none without it. A server that reports no token ids still has its
generated tokens counted, from the reply's ``usage``.

A constraint travels as ``structured``: ``response_format`` (the standard ``json_schema``
response format, default), ``structured_outputs`` (vLLM's own request field, ``{"json": schema,
"disable_any_whitespace": true}``) or ``none`` (never sent). vLLM (0.32) reads the whitespace
setting from its server's configuration only: start it with ``--structured-outputs-config
'{"backend": "guidance", "disable_any_whitespace": true}'`` for compact JSON under either field.
A server that refuses a constraint is asked again without it: a 400 or 422 (vLLM, this
benchmark's server), or a 5xx (llama.cpp's server answers a ``response_format`` type it does
not know with a 500) when the same request without the constraint then succeeds. That
generation, and every later one under a constraint of the same name, comes back with
``constrained=False``, so the caller parses it free-form and counts the fallback. A server that
accepts the schema but ignores it is caught by the caller's validation of the text.
:func:`chat_request` is the request itself (``python -m benchmark.llm.compat`` sends it too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmark.llm.base import (
    Chat,
    Constraint,
    Generation,
    Sampling,
    Usage,
    per_chat,
    sampling_key,
)
from benchmark.llm.cache import ResponseCache, cache_key

STRUCTURED = ("response_format", "structured_outputs", "none")
log = logging.getLogger(__name__)


def chat_request(
    model: str,
    chat: Chat,
    sampling: Sampling,
    constraint: Constraint | None = None,
    structured: str = "response_format",
) -> dict[str, Any]:
    """The keyword arguments of the ``openai`` client's ``chat.completions.create`` that the
    backend sends for ``chat``: ``extra_body`` holds the fields outside OpenAI's API, which the
    client merges into the JSON body. ``constraint`` travels as ``structured`` says."""
    if structured not in STRUCTURED:
        raise ValueError(f"structured={structured!r} is not one of {list(STRUCTURED)}")
    body: dict[str, Any] = {"return_tokens_as_token_ids": True}
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": chat,
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "seed": sampling.seed,
        "stop": list(sampling.stop) or None,
        "logprobs": True,
        "top_logprobs": 0,
    }
    if constraint is not None:
        schema = dict(constraint.schema)
        if structured == "response_format":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": constraint.name, "schema": schema, "strict": True},
            }
            kwargs["stop"] = None  # the schema decides where the text ends
        elif structured == "structured_outputs":
            body["structured_outputs"] = {"json": schema, "disable_any_whitespace": True}
            kwargs["stop"] = None
    kwargs["extra_body"] = body
    return kwargs


def refuses_constraint(status: int) -> bool:
    """Whether an HTTP status answering a constrained request may be the server refusing the
    constraint (then the request is sent again without it): 400 and 422 (a request the server
    finds invalid) or a 5xx (a server that fails on a field it does not know)."""
    return status in (400, 422) or status >= 500


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
        structured: str = "response_format",
    ) -> None:
        from openai import OpenAI

        if structured not in STRUCTURED:
            raise ValueError(f"structured={structured!r} is not one of {list(STRUCTURED)}")
        self.client = OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
        )
        self.name = model
        self.concurrency = concurrency
        self.cache = cache
        self.usage = Usage()
        self.structured = structured
        self.refused: set[str] = set()  # names of constraints this server refused

    def request(
        self, chat: Chat, sampling: Sampling, constraint: Constraint | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of the chat-completions call for ``chat`` under ``constraint``
        (none when the server refused that constraint's name before)."""
        if constraint is not None and constraint.name in self.refused:
            constraint = None
        return chat_request(self.name, chat, sampling, constraint, self.structured)

    @staticmethod
    def _sends_constraint(kwargs: dict[str, Any]) -> bool:
        return "response_format" in kwargs or "structured_outputs" in kwargs["extra_body"]

    def _one(self, chat: Chat, sampling: Sampling, constraint: Constraint | None) -> Generation:
        from openai import APIStatusError

        key = cache_key(self.name, chat, sampling_key(sampling, constraint))
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return Generation(**hit, cached=True)
        kwargs = self.request(chat, sampling, constraint)
        sent = self._sends_constraint(kwargs)
        try:
            resp = self.client.chat.completions.create(**kwargs)
        except APIStatusError as err:
            if not sent or constraint is None or not refuses_constraint(err.status_code):
                raise
            # Asked again without the constraint: an error now is the server's, not the schema's.
            resp = self.client.chat.completions.create(**self.request(chat, sampling, None))
            # The server refuses the schema: decode free-form; the caller counts the fallback.
            if constraint.name not in self.refused:
                log.warning(
                    "%s refused constraint %r (HTTP %d: %s); decoding free-form",
                    self.name,
                    constraint.name,
                    err.status_code,
                    err,
                )
            self.refused.add(constraint.name)
            sent = False
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
            constrained=sent,
            token_count=resp.usage.completion_tokens if resp.usage else len(content),
        )
        if self.cache is not None:
            self.cache.put(key, gen.to_json())
        return gen

    def generate(
        self,
        chats: list[Chat],
        sampling: Sampling,
        constraints: Sequence[Constraint | None] | None = None,
    ) -> list[Generation]:
        start = time.perf_counter()
        wanted = per_chat(constraints, len(chats))
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(chats)))) as pool:
            out = list(pool.map(self._one, chats, [sampling] * len(chats), wanted))
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
