"""The ``hf`` backend: any local transformers causal LM directory, on CPU (or a torch device).

Generation is batched with the KV cache and decoded step by step (:mod:`benchmark.llm.decode`):
greedy at temperature 0, else seeded sampling (temperature, top-p), each chat from its own
generator (``Sampling.row_seeds``), so the same seed gives the same text whatever the batch.
Logprobs are of the model's own distribution (temperature 1) at each generated token, which is
what RL trainers need; under a constraint too (the grammar's mask chooses among
tokens, it does not change the model's logprobs). Constraints are compiled by llguidance
(:mod:`benchmark.llm.structured`), one matcher per row, so constrained and free rows share one
batched call; stop strings apply to free rows only (a constrained row ends where its grammar
does).

Prefix reuse. Most of an agent's prompt is the same at every decision of an episode, so the KV of
a shared prompt prefix is computed once and reused (:mod:`benchmark.llm.prefix_cache`). The rule:
a chat of 2+ messages has a cacheable prefix, the chat template's token ids of all its messages
but the last (``apply_chat_template(chat[:-1], add_generation_prompt=False)``), used only when
those ids are an exact token prefix of the full prompt's ids (else that row encodes its whole
prompt). So callers put the static text (system prompt, task, skill list) in the first
message(s) and what changes per decision in the last one. The KV of each prefix is kept in an LRU
of ``prefix_cache`` entries (default 32; 0 turns reuse off: every row encodes its whole prompt)
keyed by the prefix's tokens, not the weights: a trainer that changes the weights must call
:meth:`HFBackend.clear_prefix_cache`. An entry holds 46 KB per token on SmolLM2-135M (30 layers x
3 KV heads x 64 dims x keys and values x 4 bytes), so 32 entries of 300 tokens hold about 0.45 GB.
``prefixes.hits``/``prefixes.misses`` count the distinct prefixes of each call found in or added to
the LRU, ``tokens_encoded`` the prompt tokens actually run through the model. Greedy decoding
gave the same tokens with and without the cache on every batch tried (the logprobs differ by
about 1e-5; tests/test_llm_prefix_cache.py); with the cache on, a cold and a warm cache give the
same numbers, since each prefix is encoded alone.

Measured with ``python scripts/bench_prefix_cache.py`` (SmolLM2-135M, 2 threads on 2 shared
cores, 16 chats: 8 distinct 250-token system prompts, 2 agents each with ~85-token user messages
that change at every call, 12 new tokens, greedy; two runs): a warm call (its prefixes cached)
takes 4.2-5.1 s against 11.2-13.4 s with ``prefix_cache=0`` (about 2.6x), encoding 1,512-1,530
prompt tokens instead of 5,522-5,540; the first call, which encodes each of the 8 prefixes once,
7.7-10.2 s. Both settings decode the same tokens, and ``model.generate`` on the whole prompts
took as long as ``prefix_cache=0`` (11.1-13.5 s).

Scoring encodes the prompt once and reuses its KV cache for every candidate, and computes logits
only at the candidates' positions, so its memory is the prompt's cache, not candidates x prompt
length x vocabulary.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import DynamicCache

from benchmark.llm.base import (
    Chat,
    Constraint,
    Generation,
    Sampling,
    Usage,
    pad_left,
    per_chat,
    sampling_key,
    truncate_at_stop,
)
from benchmark.llm.cache import ResponseCache, cache_key
from benchmark.llm.decode import decode, transformers_step
from benchmark.llm.memory import release_free_memory
from benchmark.llm.prefix_cache import (
    LayerKV,
    PrefixKV,
    batch_cache,
    encode_prefix,
    prefix_ids,
    template_ids,
    uses_sliding_windows,
)
from benchmark.llm.static_decode import static_decoder

if TYPE_CHECKING:
    from benchmark.llm.structured import GrammarProcessor, Grammars

FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


# The weights' precisions a backend loads. Measured on the 2-core machine (one thread, 48
# llm_agents v4 prompts, 12 at a time, 20 new tokens): 3.5-3.7 decisions/s in bfloat16 against
# 1.6 in float32; batch-1 decoding about the same (2.6-2.7 s for 40 tokens); the greedy text of
# the base model the same on 31 of the 48.
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int4": torch.float32}


class HFBackend:
    """A transformers model directory (config, weights, tokenizer). ``prefix_cache``: how many
    prompt prefixes' KV the LRU keeps (0: none, every prompt is encoded whole). ``adapter``: a
    LoRA adapter directory trained on this model, merged into its weights at load
    (:mod:`benchmark.llm.adapters`; one trained on another model is refused). ``dtype``: the
    weights' precision, ``float32`` (default) or ``bfloat16`` (after the adapter is merged in
    float32): on a CPU with bfloat16 matrix units a batch of prompts encodes several times
    faster, and the greedy text can differ from float32's (see ``DTYPES``). ``static_decode``:
    decode Llama-architecture models over a static KV cache with fused 4-bit projections
    (:mod:`.static_decode`: the same logits, fewer operations per token); false steps through
    transformers' forward."""

    per_row_seeds = True  # generate(seeds=...) samples each chat from its own generator

    def __init__(
        self,
        model_dir: str | Path,
        name: str | None = None,
        device: str = "cpu",
        cache: ResponseCache | None = None,
        threads: int | None = None,
        prefix_cache: int = 32,
        adapter: str | Path | None = None,
        dtype: str = "float32",
        static_decode: bool = True,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if dtype not in DTYPES:
            raise ValueError(f"llm.options.dtype={dtype!r} is not one of {list(DTYPES)}")
        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ValueError(f"{path} is not a transformers model directory (no config.json)")
        if threads:
            torch.set_num_threads(threads)
        name = name or path.name
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        if adapter:
            from benchmark.llm.adapters import attach_adapter, merge_adapter

            # In 4 bits the adapter stays beside the base layers (merged it would be rounded).
            join = attach_adapter if dtype == "int4" else merge_adapter
            model = join(model, adapter, name)
            name = f"{name}+{Path(adapter).name}"  # response-cache keys differ by adapter
        if dtype == "int4":
            from benchmark.llm.int4 import quantize

            self.int4_errors = quantize(model)
        elif dtype != "float32":
            model = model.to(DTYPES[dtype])
        if dtype != "float32":
            name = f"{name}@{dtype}"  # and by precision
        self._setup(model.to(device).eval(), tokenizer, name, device, cache, prefix_cache)
        if not static_decode:
            self.static = None

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, name: str, prefix_cache: int = 32) -> HFBackend:
        """A backend over a model and tokenizer already loaded (a trainer's policy: they are
        shared, not copied; call :meth:`clear_prefix_cache` after changing the weights)."""
        backend = cls.__new__(cls)
        if tokenizer.chat_template is None:  # the owner's tokenizer stays as it is
            tokenizer = copy.copy(tokenizer)
        device = next(model.parameters()).device
        backend._setup(model, tokenizer, name, str(device), None, prefix_cache)
        return backend

    def _setup(
        self,
        model: Any,
        tokenizer: Any,
        name: str,
        device: str,
        cache: ResponseCache | None,
        prefix_cache: int,
    ) -> None:
        self.prefixes = PrefixKV(prefix_cache)
        self.name = name
        self.device = torch.device(device)
        self.tokenizer = tokenizer
        if self.tokenizer.chat_template is None:
            self.tokenizer.chat_template = FALLBACK_TEMPLATE
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = model
        self.cache = cache
        self.usage = Usage()
        self._grammars = None  # built on the first constrained call
        self._reuse = prefix_cache > 0 and not uses_sliding_windows(self.model.config)
        self.tokens_encoded = 0  # prompt tokens run through the model (cached prefixes are not)
        self.static = static_decoder(model)  # None: steps go through transformers' forward

    @property
    def grammars(self) -> Grammars:
        """The llguidance grammars of this tokenizer (built once)."""
        if self._grammars is None:
            from benchmark.llm.structured import Grammars

            width = self.model.get_output_embeddings().weight.shape[0]
            self._grammars = Grammars(self.tokenizer, width)
        return self._grammars

    # ------------------------------------------------------------------ helpers
    def prompt_ids(self, chat: Chat) -> list[int]:
        return template_ids(self.tokenizer, chat, generation_prompt=True)

    def clear_prefix_cache(self) -> None:
        """Drop every cached prefix KV. Call it after changing the model's weights: the cache is
        keyed by tokens only, and would otherwise serve the old weights' keys and values."""
        self.prefixes.clear()

    def _prefix_of(self, chat: Chat, prompt: list[int]) -> list[int]:
        return prefix_ids(self.tokenizer, chat, prompt) if self._reuse else []

    def _pad_left(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask = pad_left(rows, self.tokenizer.pad_token_id)
        return ids.to(self.device), mask.to(self.device)

    def _prefix_kvs(self, heads: list[list[int]]) -> list[list[LayerKV] | None]:
        """Each row's prefix KV (None for no prefix): from the LRU, or encoded once per call."""
        found: dict[tuple[int, ...], list[LayerKV]] = {}
        for head in heads:
            key = tuple(head)
            if not key or key in found:
                continue
            kv = self.prefixes.get(key)
            if kv is None:
                kv = encode_prefix(self.model, head, self.device)
                self.tokens_encoded += len(head)
                self.prefixes.put(key, kv)
            found[key] = kv
        return [found[tuple(h)] if h else None for h in heads]

    def _decode(
        self,
        prompts: list[list[int]],
        heads: list[list[int]],
        sampling: Sampling,
        processor: GrammarProcessor | None,
        seeds: list[int] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """New tokens and their logprobs, both (rows, steps), for prompts whose first
        ``len(heads[i])`` ids are a cached (or cacheable) prefix; see :mod:`.prefix_cache`."""
        pad = self.tokenizer.pad_token_id
        tails = [p[len(h) :] for p, h in zip(prompts, heads, strict=True)]
        tail_ids, tail_mask = self._pad_left(tails)
        width = max(len(h) for h in heads)
        if width:
            cache, head_mask = batch_cache(self.model.config, self._prefix_kvs(heads), width)
            head_ids = torch.full((len(heads), width), pad, dtype=torch.long, device=self.device)
        else:
            cache = DynamicCache(config=self.model.config)
            head_mask = tail_mask.new_zeros((len(heads), 0))
            head_ids = tail_ids.new_zeros((len(heads), 0))
        # Each real token sits at its index in its own unpadded prompt; pads (masked) at 1, as
        # transformers' generate places them.
        starts = torch.tensor([len(h) for h in heads], device=self.device)
        positions = (tail_mask.cumsum(dim=1) - 1 + starts[:, None]).masked_fill(tail_mask == 0, 1)
        mask = torch.cat([head_mask, tail_mask], dim=1)
        self.tokens_encoded += sum(len(t) for t in tails)
        logits = self.model(
            input_ids=tail_ids,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1]
        stops = [self.tokenizer.eos_token_id, pad, *self._generation_eos()]
        step = (
            self.static.start(cache, mask, sampling.max_tokens)
            if self.static is not None
            else transformers_step(self.model, cache)
        )
        del cache
        return decode(
            step,
            torch.cat([head_ids, tail_ids], dim=1),
            mask,
            torch.tensor([len(p) for p in prompts], device=self.device),
            logits,
            sampling,
            sorted({t for t in stops if t is not None}),
            pad,
            processor,
            seeds,
        )

    def _generation_eos(self) -> list[int]:
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        return [] if eos is None else [eos] if isinstance(eos, int) else list(eos)

    def _finish(
        self,
        prompt: list[int],
        new: list[int],
        logprobs: list[float],
        sampling: Sampling,
        constrained: bool = False,
    ) -> Generation:
        eos = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id} - {None}
        reason = "length"
        for k, t in enumerate(new):
            if t in eos:
                new, logprobs, reason = new[:k], logprobs[:k], "stop"
                break
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        if sampling.stop and not constrained:
            cut, found = truncate_at_stop(text, sampling.stop)
            if found:
                reason = "stop"
                keep = len(new)
                for k in range(1, len(new) + 1):
                    if len(self.tokenizer.decode(new[:k], skip_special_tokens=True)) >= len(cut):
                        keep = k
                        break
                new, logprobs, text = new[:keep], logprobs[:keep], cut
        return Generation(text, new, logprobs, prompt, reason, constrained=constrained)

    # ------------------------------------------------------------------ interface
    @torch.no_grad()
    def generate(
        self,
        chats: list[Chat],
        sampling: Sampling,
        constraints: Sequence[Constraint | None] | None = None,
        seeds: Sequence[int] | None = None,
    ) -> list[Generation]:
        """As :meth:`LLM.generate`. Sampled, each chat draws from its own generator, seeded by
        ``seeds`` (one per chat) or else by ``sampling.row_seeds``: a chat's text does not
        depend on the other chats of the batch."""
        start = time.perf_counter()
        wanted = per_chat(constraints, len(chats))
        if seeds is not None and len(seeds) != len(chats):
            raise ValueError(f"seeds: expected one per chat ({len(chats)}), got {len(seeds)}")
        row_seed = list(seeds) if seeds is not None else sampling.row_seeds(len(chats))
        out: list[Generation | None] = [None] * len(chats)
        keys = [
            cache_key(
                self.name,
                chat,
                sampling_key(replace(sampling, seed=row_seed[k]), c),
            )
            for k, (chat, c) in enumerate(zip(chats, wanted, strict=True))
        ]
        if self.cache is not None:
            for k, key in enumerate(keys):
                hit = self.cache.get(key)
                if hit is not None:
                    out[k] = Generation(**hit, cached=True)
        todo = [k for k, g in enumerate(out) if g is None]
        if todo:
            prompts = [self.prompt_ids(chats[k]) for k in todo]
            processor = None
            if any(wanted[k] is not None for k in todo):
                from benchmark.llm.structured import GrammarProcessor

                g = self.grammars
                matchers = [g.matcher(wanted[k]) if wanted[k] is not None else None for k in todo]
                processor = GrammarProcessor(matchers, g.eos_id, g.vocab_size)
            heads = [self._prefix_of(chats[k], p) for k, p in zip(todo, prompts, strict=True)]
            todo_seeds = [row_seed[k] for k in todo]
            new_tokens, logp = self._decode(prompts, heads, sampling, processor, todo_seeds)
            if processor is not None:
                self.usage.add_grammar(1000 * processor.seconds, processor.steps)
            for row, k in enumerate(todo):
                held = processor is not None and processor.matchers[row] is not None
                gen = self._finish(
                    prompts[row],
                    new_tokens[row].tolist(),
                    logp[row].tolist(),
                    sampling,
                    constrained=held and not processor.failed[row],
                )
                out[k] = gen
                if self.cache is not None:
                    self.cache.put(keys[k], gen.to_json())
            del new_tokens, logp, processor
            release_free_memory()
        done = [g for g in out if g is not None]
        self.usage.add(done, 1000 * (time.perf_counter() - start))
        return done

    @torch.no_grad()
    def score(self, prompt: Chat, candidates: list[str]) -> list[float]:
        if not candidates:
            return []
        head = self.prompt_ids(prompt)
        if not head:
            raise ValueError("score needs a non-empty prompt")
        # The prompt once, keeping its KV cache and the logits of its last position only.
        first = self.model(
            input_ids=torch.tensor([head], device=self.device), use_cache=True, logits_to_keep=1
        )
        cache, start = first.cache, torch.log_softmax(first.logits[0, -1].float(), -1)
        out = []
        for cand in candidates:
            tail = self.tokenizer(cand, add_special_tokens=False)["input_ids"]
            if not tail:
                out.append(0.0)
                continue
            total = float(start[tail[0]])
            if len(tail) > 1:
                ids = torch.tensor([tail[:-1]], device=self.device)
                logits = self.model(input_ids=ids, cache=cache, use_cache=True).logits
                logp = torch.log_softmax(logits[0].float(), -1)
                total += float(
                    logp.gather(-1, torch.tensor(tail[1:], device=self.device)[:, None]).sum()
                )
                cache.crop(-(len(tail) - 1))  # back to the prompt alone for the next one
            out.append(total)
        return out
