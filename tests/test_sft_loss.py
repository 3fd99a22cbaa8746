"""The SFT loss that scores only the replies equals the one that scores every position, on a
real (tiny) Llama, gradients included; LoRA on the top layers adapts those layers only."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from baselines.rl.core.policy import LoraOptions, Policy
from baselines.rl.recipes.sft import decision_weight, reply_loss, sft_loss


def _rows(policy: Policy) -> list[tuple[list[int], int]]:
    prompts = ["navigate the fridge and open it", "explore", "pickup Apple then put it in Fridge"]
    replies = ['{"action": "open Fridge"}', '{"action": "explore"}', '{"action": "wait"}']
    out = []
    for prompt, reply in zip(prompts, replies, strict=True):
        p = policy.encode(prompt)
        r = policy.tokenizer(reply, add_special_tokens=False)["input_ids"]
        out.append((p + list(r) + [policy.tokenizer.eos_token_id], len(p)))
    return out


@pytest.mark.parametrize("lora", [None, LoraOptions(r=4, alpha=8)])
def test_scoring_only_the_replies_gives_the_same_loss_and_gradients(
    tiny_model: Path, lora: LoraOptions | None
) -> None:
    torch.manual_seed(0)
    policy = Policy(tiny_model, lora=lora)
    policy.model.train()
    rows = _rows(policy)
    assert len({len(ids) for ids, _ in rows}) == 3  # rows of different lengths pad
    losses, grads = [], []
    for loss_fn in (sft_loss, reply_loss):
        policy.model.zero_grad(set_to_none=True)
        loss = loss_fn(policy, rows)
        loss.backward()
        losses.append(loss.item())
        grads.append([p.grad.clone() for p in policy.parameters()])
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_lora_on_the_top_layers_adapts_only_those(tiny_model: Path) -> None:
    policy = Policy(tiny_model, lora=LoraOptions(r=4, alpha=8, layers=1))
    depth = policy.model.config.num_hidden_layers
    adapted = {n for n, p in policy.model.named_parameters() if p.requires_grad}
    assert adapted and all(f"layers.{depth - 1}." in n for n in adapted)
    with pytest.raises(ValueError, match="layers=9"):
        Policy(tiny_model, lora=LoraOptions(layers=9))


def test_routine_decisions_can_weigh_less_than_the_ones_that_matter(tiny_model: Path) -> None:
    assert decision_weight('{"action": "explore"}', 0.2) == 0.2
    assert decision_weight('{"action": "wait", "say": {"to": "all", "text": "hi"}}', 0.2) == 0.2
    assert decision_weight('{"action": "pickup Apple"}', 0.2) == 1.0
    assert decision_weight("explore | say all: found Apple|+01.00|+00.90|+00.20", 0.5) == 0.5
    policy = Policy(tiny_model)
    rows = _rows(policy)
    # A weight of 0 leaves a row out; equal weights change nothing.
    with torch.no_grad():
        dropped = reply_loss(policy, rows, [1.0, 0.0, 1.0]).item()
        assert dropped == pytest.approx(reply_loss(policy, [rows[0], rows[2]]).item(), rel=1e-5)
        same = reply_loss(policy, rows, [0.3, 0.3, 0.3]).item()
        assert same == pytest.approx(reply_loss(policy, rows).item(), rel=1e-5)
