"""The ``hf`` backend: any local transformers causal LM directory, on CPU (or a torch device).

Generation is batched (left padding) with the KV cache; sampling is seeded, so the same seed and
batch give the same text. Logprobs are of the model's own distribution (temperature 1) at each
generated token, which is what RL trainers need.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from benchmark.llm.base import (
    Chat,
    Generation,
    Sampling,
    Usage,
    pad_left,
    truncate_at_stop,
)
from benchmark.llm.cache import ResponseCache, cache_key

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

    # ------------------------------------------------------------------ helpers
    def prompt_ids(self, chat: Chat) -> list[int]:
        ids = self.tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)

    def _pad_left(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask = pad_left(rows, self.tokenizer.pad_token_id)
        return ids.to(self.device), mask.to(self.device)

    def _finish(
        self, prompt: list[int], new: list[int], logprobs: list[float], sampling: Sampling
    ) -> Generation:
        eos = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id} - {None}
        reason = "length"
        for k, t in enumerate(new):
            if t in eos:
                new, logprobs, reason = new[:k], logprobs[:k], "stop"
                break
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        if sampling.stop:
            cut, found = truncate_at_stop(text, sampling.stop)
            if found:
                reason = "stop"
                keep = len(new)
                for k in range(1, len(new) + 1):
                    if len(self.tokenizer.decode(new[:k], skip_special_tokens=True)) >= len(cut):
                        keep = k
                        break
                new, logprobs, text = new[:keep], logprobs[:keep], cut
        return Generation(text, new, logprobs, prompt, reason)

    # ------------------------------------------------------------------ interface
    @torch.no_grad()
    def generate(self, chats: list[Chat], sampling: Sampling) -> list[Generation]:
        start = time.perf_counter()
        out: list[Generation | None] = [None] * len(chats)
        keys = [cache_key(self.name, chat, sampling.key()) for chat in chats]
        if self.cache is not None:
            for k, key in enumerate(keys):
                hit = self.cache.get(key)
                if hit is not None:
                    out[k] = Generation(**hit, cached=True)
        todo = [k for k, g in enumerate(out) if g is None]
        if todo:
            prompts = [self.prompt_ids(chats[k]) for k in todo]
            ids, mask = self._pad_left(prompts)
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
            )
            new_tokens = result.sequences[:, ids.shape[1] :]
            logits = torch.stack(result.logits, dim=1).float()  # (batch, new, vocab)
            logp = (
                torch.log_softmax(logits, dim=-1).gather(-1, new_tokens.unsqueeze(-1)).squeeze(-1)
            )
            for row, k in enumerate(todo):
                gen = self._finish(
                    prompts[row], new_tokens[row].tolist(), logp[row].tolist(), sampling
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
        rows, spans = [], []
        for cand in candidates:
            tail = self.tokenizer(cand, add_special_tokens=False)["input_ids"]
            rows.append(head + tail)
            spans.append((len(head), len(head) + len(tail)))
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for k, r in enumerate(rows):
            ids[k, : len(r)] = torch.tensor(r)
            mask[k, : len(r)] = 1
        logits = self.model(
            input_ids=ids.to(self.device), attention_mask=mask.to(self.device)
        ).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(
            -1, ids[:, 1:].unsqueeze(-1).to(self.device)
        )
        logp = logp.squeeze(-1)
        return [float(logp[k, a - 1 : b - 1].sum()) for k, (a, b) in enumerate(spans)]
