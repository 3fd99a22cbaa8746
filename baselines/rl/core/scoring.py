"""Scoring sequences with a causal LM: the token logprobs of right-padded rows, every position
after the first (:func:`run_plain`), or only each reply after its prompt with the vocabulary
projection on the reply alone (:func:`run_replies`), or with each distinct prompt run once and
its cache repeated for the rows that share it (:func:`run_shared`, GRPO's groups complete one
prompt G times). :func:`predict` picks among them; :class:`~.policy.Policy` scores through it.
"""

from __future__ import annotations

import torch
from torch import nn

from benchmark.llm.base import pad_left


def distinct_prompts(
    ids: torch.Tensor, prompt_lengths: torch.Tensor
) -> tuple[list[int], torch.Tensor] | None:
    """(the first row of each distinct prompt, each row's index into them), or None when a
    prompt is empty."""
    keys: dict[tuple[int, ...], int] = {}
    firsts: list[int] = []
    index = []
    for b, n in enumerate(prompt_lengths.tolist()):
        if n < 1:
            return None
        key = tuple(ids[b, :n].tolist())
        if key not in keys:
            keys[key] = len(firsts)
            firsts.append(b)
        index.append(keys[key])
    return firsts, torch.tensor(index, device=ids.device)


def place(shape: torch.Size, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(B, T) float zeros with ``x`` added at ``positions`` (both (B, C)) of each row."""
    out = torch.zeros(shape, dtype=torch.float32, device=x.device)
    return out.scatter_add(1, positions, x)


def predict(
    model: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    prompt_lengths: torch.Tensor | None,
    hidden: bool,
    pad_id: int,
):
    """(positions, targets, logits, hidden, valid) of ``model`` on the rows: each distinct
    prompt run once when ``prompt_lengths`` is given, every position after the first
    otherwise."""
    if prompt_lengths is None:
        return run_plain(model, ids, mask, hidden)
    shared = distinct_prompts(ids, prompt_lengths)
    if shared is not None and len(shared[0]) < len(ids):
        return run_shared(model, ids, mask, prompt_lengths, shared, hidden, pad_id)
    return run_replies(model, ids, mask, prompt_lengths, hidden, pad_id)


def run_plain(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor, hidden: bool):
    """(positions, targets, logits, hidden, valid) for every position after the first."""
    out = model(input_ids=ids, attention_mask=mask, output_hidden_states=hidden)
    B, T = ids.shape
    positions = torch.arange(1, T, device=ids.device).expand(B, T - 1)
    states = out.hidden_states[-1][:, :-1] if hidden else None
    return positions, ids[:, 1:], out.logits[:, :-1], states, mask[:, 1:].float()


def run_replies(
    model: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    prompt_lengths: torch.Tensor,
    hidden: bool,
    pad_id: int,
):
    """Like :func:`run_plain` for the positions from each row's prompt length on, every
    prompt distinct: the rows run left-padded, so that every continuation ends at the last
    position, and the vocabulary projection runs on the last positions alone (a
    continuation is a few dozen tokens, a prompt a few hundred, the vocabulary 49k wide)."""
    dev = ids.device
    lengths = mask.sum(-1).long()
    P = prompt_lengths.to(dev).long().clamp(min=1)
    counts = (lengths - P).clamp(min=0)
    K = max(int(counts.max()), 1)
    rows = [ids[b, : int(lengths[b])].tolist() for b in range(len(ids))]
    left, left_mask = pad_left(rows, pad_id)
    left, left_mask = left.to(dev), left_mask.to(dev)
    out = model(
        input_ids=left,
        attention_mask=left_mask,
        position_ids=(left_mask.cumsum(-1) - 1).clamp(min=0),
        output_hidden_states=hidden,
        logits_to_keep=K + 1,
    )
    offsets = torch.arange(K, device=dev)
    # Kept logit i scores the token K - i positions before each row's end.
    positions = (lengths.unsqueeze(-1) - K + offsets).clamp(0, ids.shape[1] - 1)
    valid = (offsets >= (K - counts).unsqueeze(-1)).float()
    states = out.hidden_states[-1][:, -(K + 1) : -1] if hidden else None
    return positions, left[:, -K:], out.logits[:, :-1], states, valid


def run_shared(
    model: nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    prompt_lengths: torch.Tensor,
    shared: tuple[list[int], torch.Tensor],
    hidden: bool,
    pad_id: int,
):
    """Like :func:`run_plain` for the positions from each row's prompt length on, running
    each distinct prompt once (left-padded) and the continuations on its repeated cache."""
    firsts, row_to_prompt = shared
    dev = ids.device
    P = prompt_lengths.to(dev).long()
    p_ids, p_mask = pad_left([ids[row, : int(P[row])].tolist() for row in firsts], pad_id)
    p_ids, p_mask = p_ids.to(dev), p_mask.to(dev)
    p_pos = (p_mask.cumsum(-1) - 1).clamp(min=0)
    first = model(
        input_ids=p_ids,
        attention_mask=p_mask,
        position_ids=p_pos,
        use_cache=True,
        output_hidden_states=hidden,
        logits_to_keep=1,  # only the last prompt position scores a token
    )
    cache = first.cache
    cache.reorder_cache(row_to_prompt)
    lengths = mask.sum(-1)
    C = int((lengths - P).max())
    B = len(ids)
    offsets = torch.arange(C, device=dev)
    positions = (P.unsqueeze(-1) + offsets).clamp(max=ids.shape[1] - 1)
    valid = (offsets < (lengths - P).unsqueeze(-1)).float()
    cont = torch.where(valid.bool(), ids.gather(1, positions), pad_id)
    second = model(
        input_ids=cont,
        attention_mask=torch.cat([p_mask[row_to_prompt], valid.long()], dim=1),
        position_ids=P.unsqueeze(-1) + offsets,
        cache=cache,
        use_cache=True,
        output_hidden_states=hidden,
    )
    logits = torch.cat([first.logits[row_to_prompt, -1:], second.logits[:, :-1]], dim=1)
    states = None
    if hidden:
        states = torch.cat(
            [first.hidden_states[-1][row_to_prompt, -1:], second.hidden_states[-1][:, :-1]],
            dim=1,
        )
    assert logits.shape[:2] == (B, C)
    return positions, cont, logits, states, valid
