"""The ``hf`` backend: any local transformers causal LM directory, on CPU (or a torch device).

Generation is batched (left padding) with the KV cache; sampling is seeded, so the same seed and
batch give the same text. Logprobs are of the model's own distribution (temperature 1) at each
generated token, which is what RL trainers need; under a constraint too (the grammar's mask
chooses among tokens, it does not change the model's logprobs). Constraints are compiled by
llguidance (:mod:`benchmark.llm.structured`), one matcher per row, so constrained and free rows
share one batched call; stop strings apply to free rows only (a constrained row ends where its
grammar does).

Scoring encodes the prompt once and reuses its KV cache for every candidate, and computes logits
only at the candidates' positions, so its memory is the prompt's cache, not candidates x prompt
length x vocabulary.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

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

if TYPE_CHECKING:
    from benchmark.llm.structured import Grammars

FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


class HFBackend:
    """A transformers model directory (config, weights, tokenizer)."""

    def __init__(
        self,
        model_dir: str | Path,
        name: str | None = None,
        device: str = "cpu",
        cache: ResponseCache | None = None,
        threads: int | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ValueError(f"{path} is not a transformers model directory (no config.json)")
        if threads:
            torch.set_num_threads(threads)
        self.name = name or path.name
        self.device = torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        if self.tokenizer.chat_template is None:
            self.tokenizer.chat_template = FALLBACK_TEMPLATE
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = (
            AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(self.device).eval()
        )
        self.cache = cache
        self.usage = Usage()
        self._grammars = None  # built on the first constrained call

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
        ids = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    def _pad_left(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask = pad_left(rows, self.tokenizer.pad_token_id)
        return ids.to(self.device), mask.to(self.device)

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
    ) -> list[Generation]:
        start = time.perf_counter()
        wanted = per_chat(constraints, len(chats))
        out: list[Generation | None] = [None] * len(chats)
        keys = [
            cache_key(self.name, chat, sampling_key(sampling, c))
            for chat, c in zip(chats, wanted, strict=True)
        ]
        if self.cache is not None:
            for k, key in enumerate(keys):
                hit = self.cache.get(key)
                if hit is not None:
                    out[k] = Generation(**hit, cached=True)
        todo = [k for k, g in enumerate(out) if g is None]
        if todo:
            prompts = [self.prompt_ids(chats[k]) for k in todo]
            ids, mask = self._pad_left(prompts)
            processor = None
            if any(wanted[k] is not None for k in todo):
                from transformers import LogitsProcessorList

                from benchmark.llm.structured import GrammarProcessor

                g = self.grammars
                matchers = [g.matcher(wanted[k]) if wanted[k] is not None else None for k in todo]
                processor = GrammarProcessor(matchers, g.eos_id, g.vocab_size)
            torch.manual_seed(sampling.seed)
            result = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=sampling.max_tokens,
                do_sample=sampling.temperature > 0,
                temperature=sampling.temperature or None,
                top_p=sampling.top_p if sampling.temperature > 0 else None,
                top_k=None,
                pad_token_id=self.tokenizer.pad_token_id,
                output_logits=True,
                return_dict_in_generate=True,
                logits_processor=LogitsProcessorList([processor]) if processor else None,
            )
            if processor is not None:
                self.usage.add_grammar(1000 * processor.seconds, processor.steps)
            new_tokens = result.sequences[:, ids.shape[1] :]
            logits = torch.stack(result.logits, dim=1).float()  # (batch, new, vocab)
            logp = (
                torch.log_softmax(logits, dim=-1).gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
            )
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
        cache, start = first.past_key_values, torch.log_softmax(first.logits[0, -1].float(), -1)
        out = []
        for cand in candidates:
            tail = self.tokenizer(cand, add_special_tokens=False)["input_ids"]
            if not tail:
                out.append(0.0)
                continue
            total = float(start[tail[0]])
            if len(tail) > 1:
                ids = torch.tensor([tail[:-1]], device=self.device)
                logits = self.model(input_ids=ids, past_key_values=cache, use_cache=True).logits
                logp = torch.log_softmax(logits[0].float(), -1)
                total += float(
                    logp.gather(-1, torch.tensor(tail[1:], device=self.device)[:, None]).sum()
                )
                cache.crop(-(len(tail) - 1))  # back to the prompt alone for the next one
            out.append(total)
        return out
