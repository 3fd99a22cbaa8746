"""Prompt-prefix KV reuse in the ``hf``/``smollm2`` backend: the embedded SmolLM2 decodes the same
tokens with and without the cache (and as ``model.generate`` did) on a mixed batch, encoding only
the suffixes once its prefixes are cached (slow: it loads the real model). On the tiny random
model: the same tokens and logprobs as whole prompts, the LRU's bound, order and clearing, the
template rule's fallback, seeded sampling from a cold or warm cache, and the option itself."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmark.llm import Constraint, Sampling, make_llm
from benchmark.llm.base import Chat
from benchmark.llm.hf import HFBackend
from benchmark.llm.prefix_cache import prefix_ids, template_ids

SYSTEMS = [
    "You are agent_0, a household robot. You see a kitchen with a fridge, a mug and an apple.",
    "You are agent_1. Reply in one short sentence.",
    "You are a planner for two robots in a small apartment. Skills: navigate, pickup, put, open, "
    "close, toggle_on, toggle_off, slice. Objects: Apple, Fridge, Mug, Knife, Lamp, Bed.",
]
SCHEMA = {
    "type": "object",
    "properties": {"action": {"enum": ["explore", "pickup Apple", "open Fridge", "wait"]}},
    "required": ["action"],
    "additionalProperties": False,
}


def chat(system: int, user: str) -> Chat:
    return [{"role": "system", "content": SYSTEMS[system]}, {"role": "user", "content": user}]


# Three prefixes of different lengths (one shared by two rows), suffixes of different lengths, a
# constrained row and a chat of one message (no prefix).
MIXED = [
    chat(0, "Where is the apple?"),
    chat(0, "You hold nothing and the fridge is closed. What is your next action?"),
    chat(1, "What do you see?"),
    chat(2, "Give the first step of a plan to chill the apple."),
    [{"role": "user", "content": "Name one fruit."}],
]
CONSTRAINTS = [None, Constraint(SCHEMA, "decision"), None, None, None]
ONE_MESSAGE = [{"role": "user", "content": "put the apple in the fridge"}]


def generate_before_prefix_reuse(
    llm: HFBackend, chats: list[Chat], sampling: Sampling, constraints: list
) -> list[list[int]]:
    """The token ids the backend returned before prefix reuse: every prompt left-padded whole
    through ``model.generate`` with the grammar as a logits processor (greedy)."""
    from transformers import LogitsProcessorList

    from benchmark.llm.structured import GrammarProcessor

    prompts = [llm.prompt_ids(c) for c in chats]
    ids, mask = llm._pad_left(prompts)
    g = llm.grammars
    processor = GrammarProcessor(
        [g.matcher(c) if c is not None else None for c in constraints], g.eos_id, g.vocab_size
    )
    result = llm.model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=sampling.max_tokens,
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        pad_token_id=llm.tokenizer.pad_token_id,
        output_logits=True,
        return_dict_in_generate=True,
        logits_processor=LogitsProcessorList([processor]),
    )
    new = result.sequences[:, ids.shape[1] :]
    logp = torch.log_softmax(torch.stack(result.logits, 1).float(), -1)
    logp = logp.gather(-1, new.unsqueeze(-1)).squeeze(-1)
    return [
        llm._finish(p, new[r].tolist(), logp[r].tolist(), sampling).token_ids
        for r, p in enumerate(prompts)
    ]


@pytest.mark.slow
def test_smollm2_decodes_the_same_tokens_with_cached_prefixes_and_encodes_only_suffixes() -> None:
    cached, whole = make_llm("smollm2"), make_llm("smollm2", prefix_cache=0)
    sampling = Sampling(max_tokens=8)
    prompts = [cached.prompt_ids(c) for c in MIXED]
    heads = [prefix_ids(cached.tokenizer, c, p) for c, p in zip(MIXED, prompts, strict=True)]
    distinct = {tuple(h) for h in heads if h}
    assert len(distinct) == 3 and not heads[-1]
    assert len({len(h) for h in heads if h}) == 3
    suffixes = sum(len(p) - len(h) for p, h in zip(prompts, heads, strict=True))

    cold = cached.generate(MIXED, sampling, CONSTRAINTS)
    assert (cached.prefixes.hits, cached.prefixes.misses) == (0, 3)
    assert cached.tokens_encoded == suffixes + sum(len(h) for h in distinct)
    warm = cached.generate(MIXED, sampling, CONSTRAINTS)
    assert (cached.prefixes.hits, cached.prefixes.misses) == (3, 3)
    assert cached.tokens_encoded == 2 * suffixes + sum(len(h) for h in distinct)
    plain = whole.generate(MIXED, sampling, CONSTRAINTS)
    assert whole.tokens_encoded == sum(len(p) for p in prompts) and len(whole.prefixes) == 0
    before = generate_before_prefix_reuse(whole, MIXED, sampling, CONSTRAINTS)

    assert [g.token_ids for g in plain] == before
    assert [g.token_ids for g in cold] == [g.token_ids for g in warm] == before
    assert all(g.token_ids for g in cold) and cold[1].constrained and cold[1].text.startswith("{")
    for a, b in zip(cold, plain, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
        assert a.text == b.text and a.finish_reason == b.finish_reason
        assert a.prompt_ids == b.prompt_ids


@pytest.fixture
def tiny(tiny_model: Path) -> HFBackend:
    return HFBackend(tiny_model, prefix_cache=2)


def test_the_prefix_lru_keeps_the_most_recently_used_prefixes(tiny: HFBackend) -> None:
    sampling = Sampling(max_tokens=2)
    prompts = {k: tiny.prompt_ids(chat(k, "go")) for k in range(3)}
    suffix = len(prompts[0]) - len(prefix_ids(tiny.tokenizer, chat(0, "go"), prompts[0]))
    for k in (0, 1, 0, 2):  # 0 is used again before 2 arrives, so 1 is the one dropped
        tiny.generate([chat(k, "go")], sampling)
    assert len(tiny.prefixes) == 2 and (tiny.prefixes.hits, tiny.prefixes.misses) == (1, 3)
    encoded = tiny.tokens_encoded
    tiny.generate([chat(0, "go")], sampling)
    assert tiny.prefixes.hits == 2 and tiny.tokens_encoded - encoded == suffix
    tiny.generate([chat(1, "go")], sampling)
    assert tiny.prefixes.misses == 4 and len(tiny.prefixes) == 2
    assert tiny.tokens_encoded - encoded == suffix + len(prompts[1])


def test_clearing_the_prefix_cache_encodes_whole_prompts_again(tiny: HFBackend) -> None:
    chats, sampling = [chat(0, "open the fridge"), chat(1, "go")], Sampling(max_tokens=4)
    first = tiny.generate(chats, sampling)
    assert len(tiny.prefixes) == 2
    tiny.clear_prefix_cache()
    assert len(tiny.prefixes) == 0
    encoded = tiny.tokens_encoded
    again = tiny.generate(chats, sampling)
    assert tiny.tokens_encoded - encoded == sum(len(tiny.prompt_ids(c)) for c in chats)
    assert tiny.prefixes.misses == 4 and [g.token_ids for g in again] == [
        g.token_ids for g in first
    ]


def test_a_prefix_the_full_prompt_tokenises_differently_is_not_reused(
    tiny: HFBackend, tiny_model: Path
) -> None:
    # Without separators the first message's last word runs into the last message's first one,
    # and the tokenizer merges them across the boundary.
    tiny.tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    split = [
        {"role": "system", "content": "put the ap"},
        {"role": "user", "content": "ple in the fridge"},
    ]
    full = tiny.prompt_ids(split)
    head = template_ids(tiny.tokenizer, split[:1], generation_prompt=False)
    assert full[: len(head)] != head and prefix_ids(tiny.tokenizer, split, full) == []
    gen = tiny.generate([split], Sampling(max_tokens=6))[0]
    assert len(tiny.prefixes) == 0 and tiny.tokens_encoded == len(full)
    whole = HFBackend(tiny_model, prefix_cache=0)
    whole.tokenizer.chat_template = tiny.tokenizer.chat_template
    assert gen.token_ids == whole.generate([split], Sampling(max_tokens=6))[0].token_ids


def test_seeded_sampling_gives_the_same_tokens_from_a_cold_or_warm_prefix_cache(
    tiny: HFBackend,
) -> None:
    chats = [chat(0, "open the fridge"), chat(0, "go"), chat(2, "slice the apple")]
    hot = Sampling(max_tokens=10, temperature=1.0, top_p=0.9, seed=3)
    cold = tiny.generate(chats, hot)
    warm = tiny.generate(chats, hot)
    assert tiny.prefixes.hits == 2 and [g.token_ids for g in cold] == [g.token_ids for g in warm]
    assert [g.logprobs for g in cold] == [g.logprobs for g in warm]
    other = tiny.generate(chats, Sampling(max_tokens=10, temperature=1.0, top_p=0.9, seed=4))
    assert [g.token_ids for g in other] != [g.token_ids for g in cold]


def test_cached_prefixes_give_the_tokens_and_logprobs_of_whole_prompts(
    tiny: HFBackend, tiny_model: Path
) -> None:
    chats = [chat(0, "open the fridge"), chat(0, "go"), chat(2, "slice the apple"), ONE_MESSAGE]
    greedy, held = Sampling(max_tokens=10), [None, Constraint(SCHEMA, "decision"), None, None]
    tiny.generate(chats, greedy, held)  # warm: the second call below reads the cached prefixes
    whole = make_llm("hf", model=str(tiny_model), prefix_cache=0)
    got, want = tiny.generate(chats, greedy, held), whole.generate(chats, greedy, held)
    assert got[1].constrained and got[1].text.startswith('{"action": ')
    for a, b in zip(got, want, strict=True):
        assert a.token_ids == b.token_ids and a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
    assert tiny.prefixes.hits == 2 and len(whole.prefixes) == 0
    assert whole.tokens_encoded == sum(len(whole.prompt_ids(c)) for c in chats)


def test_the_prefix_cache_size_is_an_llm_option_and_must_not_be_negative(tiny_model: Path) -> None:
    from baselines.llm_support import config_llm
    from benchmark.llm.resources import LLMPool

    config = {"backend": "hf", "model": str(tiny_model), "options": {"prefix_cache": 0}}
    llm = config_llm(config, LLMPool())
    assert isinstance(llm, HFBackend) and llm.prefixes.capacity == 0
    llm.generate([chat(0, "go")], Sampling(max_tokens=2))
    assert len(llm.prefixes) == 0 and llm.tokens_encoded == len(llm.prompt_ids(chat(0, "go")))
    with pytest.raises(ValueError, match="prefix_cache=-1"):
        make_llm("hf", model=str(tiny_model), prefix_cache=-1)
