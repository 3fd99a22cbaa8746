"""The in-process ``llm=vllm`` backend on vLLM's CPU build: the smoke suite played under
constrained decoding, and the backend's generations, logprobs and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from vllm_harness import CHATS, DECISIONS, OBJECTS, nested, run_smoke

from baselines.llm_agents.team import decision_schema, read_decision
from benchmark.env.grammar import parse_action
from benchmark.llm import Constraint, ConstraintError, Sampling, make_llm
from benchmark.skills import skill_names


@pytest.fixture(scope="module")
def llm():
    backend = make_llm("vllm")
    yield backend
    backend.close()


def test_the_smoke_suite_plays_in_process_with_no_parse_failure(
    short_smoke: Path, tmp_path
) -> None:
    rows = run_smoke(tmp_path / "run", short_smoke, "llm=vllm")
    assert len(rows) == 6 and all(r["status"] == "ok" for r in rows), rows
    assert {r["family"] for r in rows} == {
        "transport",
        "rearrange",
        "prepare",
        "search",
        "heavy-lift",
        "switch-off",
    }
    for r in rows:
        # The LLM was asked until one agent had made its DECISIONS decisions (the episode's
        # limit), and every reply was a decision.
        assert DECISIONS <= r["L_decisions"] <= 2 * DECISIONS and r["llm/calls"] > 0, r
        assert r["llm/parse_fail_rate"] == 0.0 and r["llm/fallback_rate"] == 0.0, r
        assert r["llm/tokens_out"] > 0


def test_constrained_generations_are_compact_valid_decisions_with_logprobs(llm) -> None:
    assert llm.name == "SmolLM2-135M-Instruct@bfloat16"  # vLLM's CPU default precision
    c = Constraint(decision_schema(skill_names(), OBJECTS, ["all", "agent_1"], 20), "decision")
    gens = llm.generate(CHATS, Sampling(max_tokens=64, temperature=0.7, seed=1), [c, None, c])
    for g in (gens[0], gens[2]):
        assert g.constrained and g.finish_reason == "stop", g.text
        assert "\n" not in g.text and g.text.startswith('{"action":"'), g.text
        line = read_decision(g.text, c.schema)
        assert line is not None and parse_action(line).target in (*OBJECTS, None), g.text
        assert len(g.logprobs) == len(g.token_ids) > 0 and all(lp <= 0 for lp in g.logprobs)
    assert not gens[1].constrained and gens[1].logprobs
    assert gens[0].text == gens[2].text  # the same seed, the same reply


def test_a_schema_vllm_refuses_raises_a_constraint_error_naming_it(llm) -> None:
    with pytest.raises(ConstraintError, match=r"\['deep'\].*nested too deeply"):
        llm.generate(CHATS[:1], Sampling(max_tokens=8), [Constraint(nested(70), "deep")])


def test_scores_are_log_likelihoods_of_the_candidates(llm) -> None:
    yes, long = llm.score(CHATS[0], ["open Fridge", "open Fridge and then go to the garden"])
    assert yes < 0 and long < yes
