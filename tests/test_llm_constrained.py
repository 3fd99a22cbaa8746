"""Outputs valid by construction: JSON-schema constraints decoded with llguidance on a tiny,
randomly initialised model (whose free text is garbage, so only the grammar can make it valid),
through the real OpenAI-compatible server on loopback (honouring, ignoring and refusing the
schema), the decision and plan schemas, and vLLM's structured-outputs request."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from baselines.llm_agents.team import LLMAgentsTeam, decision_schema, extract_action, read_decision
from baselines.llm_planner import LLMPlannerTeam
from baselines.llm_support import constrained_default, load_prompt
from benchmark.env.grammar import parse_action
from benchmark.llm import Constraint, ConstraintError, Sampling, make_llm
from benchmark.llm.hf import HFBackend
from benchmark.llm.resources import LLMResources
from benchmark.llm.tiny import save_tiny_llama, train_tokenizer
from benchmark.llm.vllm_backend import sampling_params
from benchmark.skills import plain_skills, skill_names
from benchmark.tasks.decompose import complete_items, grammar_decompose, plan_schema
from benchmark.tasks.spec import task_registry

OBJECTS = ["Apple|+01.00|+00.90|-00.50", "Fridge|-01.25|+00.00|+02.00", "Mug|+00.10|+01.20|+00.33"]
AGENTS = ["agent_0", "agent_1"]
CHATS = [
    [{"role": "user", "content": f"Robot {k}: put the apple in the fridge."}] for k in range(3)
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    corpus = [t.instructions[level] for t in task_registry().values() for level in t.instructions]
    corpus += [" ".join(skill_names()), " ".join(OBJECTS), '{"action": "say", "to": "all"} agent_0']
    out = tmp_path_factory.mktemp("tiny")
    save_tiny_llama(out, train_tokenizer(corpus, vocab_size=400))
    return out


@pytest.fixture(scope="module")
def tiny(tiny_model: Path) -> HFBackend:
    return HFBackend(tiny_model)


def decision() -> Constraint:
    return Constraint(decision_schema(skill_names(), OBJECTS, ["all", "agent_1"], 20), "decision")


def test_a_random_model_decodes_only_valid_decisions_batched_with_free_rows(tiny) -> None:
    c = decision()
    for sampling in (Sampling(max_tokens=96), Sampling(max_tokens=96, temperature=1.0, seed=5)):
        gens = tiny.generate(CHATS, sampling, [c, None, c])
        for g in (gens[0], gens[2]):
            assert g.constrained and g.finish_reason == "stop", g.text
            line = read_decision(g.text, c.schema)
            assert line is not None, g.text
            call = parse_action(line)
            assert call.name in skill_names() and (call.target in OBJECTS or call.target is None)
        assert not gens[1].constrained and read_decision(gens[1].text, c.schema) is None
    usage = tiny.usage.snapshot()
    assert usage["constrained"] == 4 and usage["grammar_steps"] > 0 and usage["grammar_ms"] > 0


def test_constrained_and_free_generations_never_share_a_cache_entry(tiny_model, tmp_path) -> None:
    llm = make_llm("hf", model=str(tiny_model), cache=tmp_path / "c.sqlite")
    free = llm.generate(CHATS[:1], Sampling(max_tokens=24))[0]
    held = llm.generate(CHATS[:1], Sampling(max_tokens=24), [decision()])[0]
    again = llm.generate(CHATS[:1], Sampling(max_tokens=24), [decision()])[0]
    assert not held.cached and again.cached and again.constrained
    assert again.text == held.text != free.text


def test_a_truncated_decision_keeps_a_complete_action_and_nothing_else() -> None:
    schema = decision_schema(skill_names(), OBJECTS, ["all"])
    cut = '{"action": "pickup Apple|+01.00|+00.90|-00.50", "say": {"to": "all", "text": "I ha'
    assert read_decision(cut, schema, truncated=True) == f"pickup {OBJECTS[0]}"
    assert read_decision(cut, schema) is None
    assert read_decision('{"action": "pickup Apple|+01.0', schema, truncated=True) is None
    assert read_decision('{"action": "pickup Banana|1|2|3"}', schema) is None
    full = '{"action": "explore", "say": {"to": "all", "text": "found it"}}'
    assert read_decision(full, schema) == "explore | say all: found it"
    assert (
        read_decision('{"action": "explore", "say": {"to": "agent_9", "text": "x"}}', schema)
        is None
    )


def test_a_decision_cut_before_its_action_is_a_counted_truncation_not_a_guess(
    tiny_model, llm_pool
) -> None:
    from benchmark.env import make_env

    team = LLMAgentsTeam(llm={"backend": "hf", "model": str(tiny_model)}, max_tokens=3)
    team.bind(LLMResources(llm_pool))
    env = make_env("switch_off_bedroom_v0", n_agents=2, seed=0)
    obs, _ = env.reset(seed=0)
    team.reset(list(env.possible_agents), env.task_info())
    assert {a.split(" | ")[0] for a in team.act(obs).values()} == {"explore"}
    m = team.metrics()
    assert m["llm/truncated_rate"] == 1.0 and m["llm/parse_fail_rate"] == 1.0
    assert m["llm/fallback_rate"] == 0.0


def test_an_agent_that_knows_no_objects_may_only_use_plain_skills(tiny) -> None:
    schema = decision_schema(skill_names(), [], [])
    assert schema["properties"]["action"]["enum"] == list(plain_skills())
    assert "say" not in schema["properties"]
    gen = tiny.generate(CHATS[:1], Sampling(max_tokens=32), [Constraint(schema, "d")])[0]
    assert json.loads(gen.text)["action"] in plain_skills()
    with pytest.raises(ConstraintError, match="no valid action"):
        decision_schema(["pickup", "navigate"], [], [])
    with pytest.raises(ConstraintError, match="unknown skills \\['fly'\\]"):
        decision_schema(["fly"], OBJECTS)


def test_constraints_and_their_lists_are_checked_with_clear_errors(tiny) -> None:
    with pytest.raises(ConstraintError, match="non-empty object"):
        Constraint({}, "x")
    with pytest.raises(ConstraintError, match="letters, digits"):
        Constraint({"type": "object"}, "has space")
    with pytest.raises(ValueError, match="one per chat"):
        tiny.generate(CHATS, Sampling(max_tokens=4), [decision()])
    bad = Constraint({"type": "string", "pattern": "(?<=a)b"}, "lookbehind")
    with pytest.raises(ConstraintError, match="'lookbehind' cannot be compiled"):
        tiny.generate(CHATS[:1], Sampling(max_tokens=4), [bad])


def test_plans_decoded_under_the_plan_schema_are_valid_and_acyclic(tiny) -> None:
    template = load_prompt("decompose_v2")
    caps = {"agent_1": ["pickup", "put"]}
    for seed in range(3):
        sampling = Sampling(max_tokens=400, temperature=1.0, seed=seed)
        plan = grammar_decompose(
            tiny, template, "Chill the apple.", OBJECTS, AGENTS, caps, sampling
        )
        assert plan.constrained and plan.ok and plan.invalid == 0 and not plan.errors, plan.raw
        ids = [s.id for s in plan.subtasks]
        assert ids == [f"s{k + 1}" for k in range(len(ids))] and len(ids) <= 8
        for k, s in enumerate(plan.subtasks):
            assert s.target in OBJECTS and set(s.after) <= set(ids[:k])
            assert not (s.agent == "agent_1" and s.skill in ("pickup", "put"))


def test_a_plan_cut_by_the_token_limit_keeps_its_complete_subtasks(tiny) -> None:
    text = (
        '[{"id": "s1", "agent": "agent_0", "skill": "pickup", "target": "Mug|+00.10|+01.20|+00.33"'
        ', "after": []}, {"id": "s2", "agent": "agent_1", "skill": "op'
    )
    assert [i["id"] for i in complete_items(text)] == ["s1"] and complete_items("none") is None
    template = load_prompt("decompose_v2")
    plan = grammar_decompose(
        tiny, template, "Chill the apple.", OBJECTS, AGENTS, {}, Sampling(max_tokens=6)
    )
    assert plan.truncated and plan.constrained and not plan.ok


def test_no_plan_schema_without_objects_or_able_agents() -> None:
    with pytest.raises(ConstraintError, match="no known objects"):
        plan_schema([], AGENTS, {})
    everything = list(
        plan_schema(OBJECTS, ["a"], {})["prefixItems"][0]["properties"]["skill"]["enum"]
    )
    with pytest.raises(ConstraintError, match="may use a plan skill"):
        plan_schema(OBJECTS, ["a"], {"a": everything})
    by_agent = plan_schema(OBJECTS, AGENTS, {"agent_1": ["slice"]}, max_subtasks=2)
    assert len(by_agent["prefixItems"]) == 2 and len(by_agent["prefixItems"][1]["anyOf"]) == 2


@pytest.fixture
def server(tiny_model: Path, request):
    import uvicorn

    from benchmark.llm.serve import create_app

    llm = HFBackend(tiny_model)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(llm, "tiny", honour_schema=getattr(request, "param", True))
    srv = uvicorn.Server(uvicorn.Config(app, log_level="error"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield llm, f"http://127.0.0.1:{port}/v1"
    srv.should_exit = True
    thread.join(10)


def test_the_openai_backend_gets_schema_valid_text_from_the_local_server(server) -> None:
    local, url = server
    remote = make_llm("openai", model="tiny", base_url=url, max_retries=0)
    c, sampling = decision(), Sampling(max_tokens=96)
    got = remote.generate(CHATS, sampling, [c, None, c])
    want = local.generate(CHATS, sampling, [c, None, c])
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    assert [g.constrained for g in got] == [True, False, True]
    assert all(read_decision(g.text, c.schema) for g in (got[0], got[2]))
    assert remote.request(CHATS[0], sampling, c)["response_format"]["json_schema"] == {
        "name": "decision",
        "schema": c.schema,
        "strict": True,
    }


def test_a_schema_the_server_refuses_falls_back_to_free_form_once_per_name(server) -> None:
    _, url = server
    remote = make_llm("openai", model="tiny", base_url=url, max_retries=0)
    bad = Constraint({"type": "string", "pattern": "(?<=a)b"}, "lookbehind")
    first = remote.generate(CHATS[:1], Sampling(max_tokens=8), [bad])[0]
    assert not first.constrained and first.token_ids and remote.refused == {"lookbehind"}
    assert "response_format" not in remote.request(CHATS[0], Sampling(), bad)


@pytest.mark.parametrize("server", [False], indirect=True)
def test_a_server_that_ignores_the_schema_leads_to_counted_fallbacks(server, llm_pool) -> None:
    from benchmark.env import make_env

    _, url = server
    llm = {"backend": "openai", "model": "tiny", "options": {"base_url": url, "max_retries": 0}}
    team = LLMAgentsTeam(llm=llm, max_tokens=8)
    team.bind(LLMResources(llm_pool))
    env = make_env("switch_off_bedroom_v0", n_agents=2, seed=0)
    obs, _ = env.reset(seed=0)
    team.reset(list(env.possible_agents), env.task_info())
    for _ in range(2):
        actions = team.act(obs)
        assert all(parse_action(a) for a in actions.values())
        obs, *_ = env.step(actions)
    m = team.metrics()
    # The server accepted the schema and decoded free-form: every reply failed validation, went
    # to the free-form parser (which found nothing in a random model's text) and was counted.
    assert m["llm/calls"] >= 2 and m["llm/fallback_rate"] == 1.0 and m["llm/parse_fail_rate"] == 1.0


def test_the_free_form_parser_reads_json_decisions() -> None:
    text = 'Sure: {"action": "navigate Fridge|-01.25|+00.00|+02.00", "say": {"to": "all", "text": '
    text += '"hi"}}'
    assert extract_action(text, []) == "navigate Fridge|-01.25|+00.00|+02.00 | say all: hi"
    assert extract_action('{"action": "fly away"}', []) is None


def test_vllm_requests_carry_the_schema_as_structured_outputs() -> None:
    c = decision()
    params = sampling_params(Sampling(max_tokens=12, stop=("\n",)), c)
    assert params["structured_outputs"] == {"json": dict(c.schema), "disable_any_whitespace": True}
    assert params["stop"] is None and params["max_tokens"] == 12
    free = sampling_params(Sampling(max_tokens=12, stop=("\n",)), None)
    assert "structured_outputs" not in free and free["stop"] == ["\n"]
    vllm = pytest.importorskip("vllm")  # where it is installed (the gpu extra): the real classes
    from vllm.sampling_params import StructuredOutputsParams

    params["structured_outputs"] = StructuredOutputsParams(**params["structured_outputs"])
    assert vllm.SamplingParams(**params).structured_outputs.json == dict(c.schema)


def test_constrained_is_the_default_and_the_llm_config_can_turn_it_off() -> None:
    assert constrained_default({"backend": "smollm2"}, None) is True
    assert constrained_default({"backend": "smollm2", "constrained": False}, None) is False
    assert constrained_default({"backend": "smollm2", "constrained": False}, True) is True
    with pytest.raises(ValueError, match=r"llm\.constrained"):
        constrained_default({"constrained": "yes"}, None)
    assert LLMPlannerTeam(llm={"backend": "smollm2"}).constrained
    assert not LLMAgentsTeam(llm={"backend": "smollm2", "constrained": False}).constrained


def test_agents_read_and_write_handles_and_the_environment_gets_object_ids(
    tiny_model, llm_pool
) -> None:
    from benchmark.env import make_env

    team = LLMAgentsTeam(llm={"backend": "hf", "model": str(tiny_model)}, max_tokens=48)
    team.bind(LLMResources(llm_pool))
    env = make_env("transport_apple_fridge_v0", n_agents=2, seed=0)
    obs, _ = env.reset(seed=0)
    team.reset(list(env.possible_agents), env.task_info())
    actions = team.act(obs)
    for name, line in actions.items():
        names = team.names[name]
        call = parse_action(line)
        # The env reads objectIds; the prompt and the schema speak handles only.
        assert call.target is None or call.target in names.by_id, line
        system, user = (m["content"] for m in team.chat(name, obs[name]))
        assert "|" not in user.replace(" | ", "") and name in system
        enum = team.constraint(name, obs[name]).schema["properties"]["action"]["enum"]
        assert all("|" not in a for a in enum)
        seen = {names.by_id[o["objectId"]] for o in obs[name]["visible"]}
        assert seen <= set(names.handles()) and len(set(names.handles())) == len(names.by_id)
    # A teacher's action is taught in handles, and read back to the same objectIds.
    agent = env.possible_agents[0]
    target = obs[agent]["visible"][0]["objectId"]
    reply = team.reply_for(agent, f"navigate {target} | say all: found {target}")
    assert "|" not in reply
    schema = decision_schema(skill_names(), team.names[agent].handles(), ["all"])
    line = read_decision(reply, schema)
    assert team.names[agent].expand(line) == f"navigate {target} | say all: found {target}"
    assert team.reply_for(agent, "pickup Mug|+09.00|+00.00|+09.00") is None
