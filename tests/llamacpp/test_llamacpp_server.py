"""The ``openai`` backend and the ``llm_agents`` team against a server this project did not
write: llama.cpp's (llama-cpp-python 0.3.36). It refuses ``response_format`` ``json_schema``
with a 500, returns logprobs only with ``top_logprobs`` and no token ids, and honours its seed;
the backend falls back to free-form decoding once, and the team counts every reply a fallback."""

from __future__ import annotations

import pytest

from baselines.llm_agents.team import LLMAgentsTeam
from benchmark.env import make_env
from benchmark.env.grammar import parse_action
from benchmark.llm import Constraint, Sampling, make_llm
from benchmark.llm.compat import Probe
from benchmark.llm.resources import LLMResources

MODEL = "smollm2"  # the name the server is started with (conftest.py)
CHATS = [
    [{"role": "user", "content": f"Put the apple number {k} in the fridge."}] for k in range(2)
]
DECISION = Constraint(
    {
        "type": "object",
        "properties": {"action": {"enum": ["explore", "wait"]}},
        "required": ["action"],
        "additionalProperties": False,
    },
    "decision",
)


def test_the_probe_records_what_llama_cpp_does(llamacpp_url: str) -> None:
    row = Probe(llamacpp_url, MODEL).run()
    assert row["response_format"].startswith("refused (HTTP 5")  # json_schema: not a type it knows
    assert row["structured_outputs"] == "ignored"
    assert row["json_object_schema"] == "honoured"  # its own form of the same request
    assert row["logprobs"] == "every token" and row["logprobs_plain"] == "none"
    assert row["token_ids"] == "no"
    assert row["seed"] == "same seed, same text; other seed differs"
    assert row["error"].startswith("HTTP 500, OpenAI error object")
    assert row["unknown_model"] == "served anyway"


def test_the_backend_falls_back_once_and_keeps_logprobs_and_seeds(llamacpp_url: str) -> None:
    llm = make_llm("openai", model=MODEL, base_url=llamacpp_url, max_retries=0, concurrency=2)
    hot = Sampling(max_tokens=12, temperature=1.0, seed=5)
    first = llm.generate(CHATS, hot, [DECISION, None])
    assert llm.refused == {"decision"} and [g.constrained for g in first] == [False, False]
    for g in first:
        assert g.text and g.token_ids == [] and 0 < len(g.logprobs) == g.tokens <= 12
        assert all(lp <= 0 for lp in g.logprobs) and g.prompt_tokens > 0
    again = llm.generate(CHATS, hot, [DECISION, None])
    assert [g.text for g in again] == [g.text for g in first]
    usage = llm.usage.snapshot()
    assert usage["calls"] == 4 and usage["tokens_out"] == 2 * sum(g.tokens for g in first)


def test_llm_agents_plays_with_every_reply_counted_a_fallback(llamacpp_url: str, llm_pool) -> None:
    llm = {"backend": "openai", "model": MODEL, "options": {"base_url": llamacpp_url}}
    team = LLMAgentsTeam(llm=llm, max_tokens=32)
    team.bind(LLMResources(llm_pool))
    env = make_env("switch_off_kitchen_v0", n_agents=2, seed=0)
    obs, _ = env.reset(seed=0)
    team.reset(list(env.possible_agents), env.task_info())
    for _ in range(3):
        actions = team.act(obs)
        assert actions and all(parse_action(a) for a in actions.values())
        obs, *_ = env.step(actions)
    m = team.metrics()
    assert m["llm/calls"] >= 3 and m["llm/tokens_out"] > 0
    assert m["llm/fallback_rate"] == pytest.approx(1.0)
    team.close()
