"""The trained policy: a transformers causal LM (optionally with LoRA adapters through ``peft``
and a value head for PPO), its token-level generation and its batched log-probabilities; the
reference it is measured against is :mod:`baselines.rl.core.reference`.

Generation works on token ids: the trainer keeps exactly the ids the generator produced, with
the logprobs of the model's own distribution (temperature 1) at each generated token.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from baselines.rl.core.reference import Reference
from baselines.rl.core.scoring import place, predict
from benchmark.llm.base import Sampling, pad_left


@dataclass(frozen=True)
class LoraOptions:
    """LoRA adapters (``peft``) on the attention projections; ``layers`` > 0 puts them on the
    top ``layers`` transformer layers only, so a backward pass stops there (the layers below
    hold nothing to train and need no gradient)."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "v_proj")
    layers: int = 0


@dataclass
class Forward:
    """Per-token outputs aligned to the input positions (position t scores token t from the
    context before it; position 0 holds zeros). All (B, T)."""

    logp: torch.Tensor
    entropy: torch.Tensor
    values: torch.Tensor | None


def load_tokenizer(model_dir: str | Path) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def encode_prompt(tokenizer: Any, text: str) -> list[int]:
    """Prompt ids of ``text``: the chat template's user turn where the tokenizer has one, else
    the plain text (every generator encodes prompts with this)."""
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
        )
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class Policy:
    """A causal LM policy.

    Args:
        model_dir: a transformers model directory (config, weights, tokenizer).
        value_head: add a linear value head on the last hidden state (PPO).
        lora: wrap the model in LoRA adapters; only the adapters (and the value head) train.
        threads: torch CPU threads for this process.
    """

    def __init__(
        self,
        model_dir: str | Path,
        value_head: bool = False,
        lora: LoraOptions | None = None,
        device: str = "cpu",
        threads: int | None = None,
    ) -> None:
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        path = Path(model_dir)
        if not (path / "config.json").is_file():
            raise ValueError(f"{path} is not a transformers model directory (no config.json)")
        if threads:
            torch.set_num_threads(threads)
        self.model_dir = path
        self.device = torch.device(device)
        self.tokenizer = load_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        self.lora = lora
        if lora is not None:
            try:
                from peft import LoraConfig, get_peft_model
            except ImportError as err:  # pragma: no cover - peft is a core dependency
                raise ImportError("LoRA needs peft: pip install peft") from err
            depth = model.config.num_hidden_layers
            if not 0 <= lora.layers <= depth:
                raise ValueError(f"LoraOptions.layers={lora.layers}: the model has {depth} layers")
            top = list(range(depth - lora.layers, depth)) if lora.layers else None
            model = get_peft_model(
                model,
                LoraConfig(
                    r=lora.r,
                    lora_alpha=lora.alpha,
                    lora_dropout=lora.dropout,
                    target_modules=list(lora.target_modules),
                    layers_to_transform=top,
                    task_type="CAUSAL_LM",
                ),
            )
        self.model = model.to(self.device)
        self.model.eval()
        self.value_head: nn.Linear | None = None
        if value_head:
            hidden = self.model.config.hidden_size
            self.value_head = nn.Linear(hidden, 1).to(self.device)
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)
        self.reference = Reference(self.model, lora is not None, self.weights, self.load_weights)
        eos = {self.tokenizer.eos_token_id}
        self.stop_ids = eos - {None}

    # ------------------------------------------------------------------ text
    def encode(self, text: str) -> list[int]:
        return encode_prompt(self.tokenizer, text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # ------------------------------------------------------------------ parameters
    def parameters(self) -> Iterator[nn.Parameter]:
        """The trainable parameters (adapters only under LoRA) and the value head."""
        yield from (p for p in self.model.parameters() if p.requires_grad)
        if self.value_head is not None:
            yield from self.value_head.parameters()

    def weights(self) -> dict[str, torch.Tensor]:
        """What a generator needs to mirror this policy: the trainable model tensors."""
        trainable = {n for n, p in self.model.named_parameters() if p.requires_grad}
        return {
            n: t.detach().cpu().clone()
            for n, t in self.model.state_dict().items()
            if n in trainable
        }

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        missing = set(weights) - set(self.model.state_dict())
        if missing:
            raise ValueError(f"weights for unknown parameters: {sorted(missing)[:5]}")
        self.model.load_state_dict(weights, strict=False)

    def state(self) -> dict[str, Any]:
        """Everything a checkpoint needs to restore the policy. Under LoRA that is the adapter
        tensors alone (``model_part: trainable``): the frozen base is rebuilt as it was by the
        constructor, so a checkpoint of SmolLM2-135M's adapters takes a few MB, not 540."""
        if self.lora is not None:
            model, part = self.weights(), "trainable"
        else:
            model = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
            part = "full"
        return {
            "model": model,
            "model_part": part,
            "value_head": None if self.value_head is None else self.value_head.state_dict(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        if state.get("model_part", "full") == "trainable":
            trainable = {n for n, p in self.model.named_parameters() if p.requires_grad}
            saved = set(state["model"])
            if saved != trainable:
                raise ValueError(
                    "the checkpoint's adapter tensors are not this policy's: "
                    f"{len(saved - trainable)} unknown (e.g. {sorted(saved - trainable)[:3]}), "
                    f"{len(trainable - saved)} missing (e.g. {sorted(trainable - saved)[:3]}); "
                    "was it written with other LoRA settings?"
                )
            self.model.load_state_dict(state["model"], strict=False)
        else:
            self.model.load_state_dict(state["model"])
        if self.value_head is not None and state.get("value_head") is not None:
            self.value_head.load_state_dict(state["value_head"])

    def save_pretrained(self, out: str | Path) -> Path:
        """A plain transformers directory of the current weights (LoRA merged)."""
        out = Path(out)
        model = self.model
        if self.lora is not None:
            model = copy.deepcopy(model).merge_and_unload()
        model.save_pretrained(out)
        self.tokenizer.save_pretrained(out)
        return out

    # ------------------------------------------------------------------ generation
    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], sampling: Sampling
    ) -> list[tuple[list[int], list[float]]]:
        """Complete each prompt; returns (generated ids, their logprobs) per prompt. The ids end
        with the end-of-sequence token when the model produced it. Seeded by ``sampling.seed``."""
        if not prompts:
            return []
        pad = self.tokenizer.pad_token_id
        ids, mask = pad_left(prompts, pad)
        width = ids.shape[1]
        torch.manual_seed(sampling.seed)
        sample = sampling.temperature > 0
        result = self.model.generate(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            max_new_tokens=sampling.max_tokens,
            do_sample=sample,
            temperature=sampling.temperature if sample else None,
            top_p=sampling.top_p if sample else None,
            top_k=None,
            pad_token_id=pad,
            eos_token_id=sorted(self.stop_ids),
            output_logits=True,
            return_dict_in_generate=True,
        )
        new = result.sequences[:, width:].cpu()
        logits = torch.stack(result.logits, dim=1).float().cpu()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        out = []
        for row in range(len(prompts)):
            tokens = new[row].tolist()
            end = len(tokens)
            for k, t in enumerate(tokens):
                if t in self.stop_ids:
                    end = k + 1
                    break
            out.append((tokens[:end], logp[row, :end].tolist()))
        return out

    # ------------------------------------------------------------------ scoring
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        values: bool = False,
        entropy: bool = True,
        reference: bool = False,
        entropy_grad: bool = False,
        prompt_lengths: torch.Tensor | None = None,
    ) -> Forward:
        """Token logprobs (and entropies, values) of right-padded sequences. With
        ``reference`` the frozen reference model scores instead (no gradients).

        With ``prompt_lengths`` (B,), the first scored position of each row, rows that share
        the same prompt run it once: the prompt's attention cache is computed per distinct
        prompt and repeated, and only the rest of each row runs on top of it (GRPO groups
        complete one prompt G times). Positions before a row's prompt length are then not
        scored (zeros)."""
        ids = input_ids.to(self.device)
        mask = attention_mask.to(self.device)
        need_hidden = values and self.value_head is not None and not reference
        grad = torch.is_grad_enabled() and not reference
        with self.reference.scoring(reference) as model, torch.set_grad_enabled(grad):
            positions, targets, logits, hidden, valid = predict(
                model, ids, mask, prompt_lengths, need_hidden, self.tokenizer.pad_token_id
            )
            logsm = torch.log_softmax(logits.float(), dim=-1)

            def scatter(x: torch.Tensor) -> torch.Tensor:
                return place(ids.shape, positions, x * valid)

            logp = scatter(logsm.gather(-1, targets.unsqueeze(-1)).squeeze(-1))
            ent = torch.zeros_like(logp)
            if entropy:
                with torch.set_grad_enabled(entropy_grad and grad):
                    ent = scatter(-(logsm.exp() * logsm).sum(-1))
            vals = None
            if need_hidden:
                assert self.value_head is not None and hidden is not None
                vals = scatter(self.value_head(hidden.float()).squeeze(-1))
        return Forward(logp, ent, vals)

    @torch.no_grad()
    def reference_kl(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        prompt_lengths: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """(B, T) exact KL(policy || reference) in nats between the two next-token
        distributions over the whole vocabulary, at the positions :meth:`forward` scores
        (zeros elsewhere). Costs one forward pass of each model; the reference must exist
        (:meth:`freeze_reference`; under LoRA without it, the base model)."""
        if not self.reference.exists:
            raise RuntimeError("reference_kl needs a reference: call freeze_reference() first")
        ids = input_ids.to(self.device)
        mask = attention_mask.to(self.device)
        dists = []
        for reference in (False, True):
            with self.reference.scoring(reference) as model:
                positions, _, logits, _, valid = predict(
                    model, ids, mask, prompt_lengths, False, self.tokenizer.pad_token_id
                )
            dists.append(torch.log_softmax(logits.float(), dim=-1))
        logp, logq = dists
        return place(ids.shape, positions, (logp.exp() * (logp - logq)).sum(-1) * valid)

    def freeze_reference(self) -> None:
        """Take the current weights as the KL reference (call before training starts; under
        LoRA the adapter weights: see :mod:`baselines.rl.core.reference`)."""
        self.reference.freeze()


def policies_dir() -> Path:
    """Where ``baselines.sft`` saves named policies: ``<cache>/policies``."""
    from benchmark.paths import cache_dir

    return cache_dir() / "policies"


def resolve_model_dir(init: str) -> Path:
    """A model directory from ``init``: ``smollm2`` (the embedded model), a path, or the name of
    a policy saved by ``python -m baselines.sft``."""
    if init == "smollm2":
        from benchmark.llm.smollm2 import smollm2_dir

        return smollm2_dir()
    path = Path(init).expanduser()
    if (path / "config.json").is_file():
        return path
    named = policies_dir() / init
    if (named / "config.json").is_file():
        return named
    raise ValueError(
        f"policy init {init!r} is neither 'smollm2', a model directory nor a saved policy in "
        f"{policies_dir()}; create one with: python -m baselines.sft name={init}"
    )
