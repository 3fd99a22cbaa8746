"""LLM plumbing on a tiny, randomly initialised transformers model built here, a real
OpenAI-compatible server on loopback driven by the official client, and decomposition parsing."""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from pathlib import Path

import httpx
import pytest
import torch

from benchmark.llm import ResponseCache, Sampling, make_llm
from benchmark.llm.hf import HFBackend
from benchmark.tasks.decompose import (
    Decomposition,
    Subtask,
    build_prompt,
    constrained_decompose,
    decompose,
    extract_json,
    quality,
    validate,
)
from benchmark.tasks.goals import Atom

CHATS = [
    [{"role": "user", "content": f"Put the apple number {k} in the fridge."}] for k in range(3)
]


def test_generation_is_batched_seeded_and_returns_ids_and_logprobs(tiny_model: Path) -> None:
    llm = HFBackend(tiny_model)
    greedy = llm.generate(CHATS, Sampling(max_tokens=12))
    assert [g.text for g in greedy] == [
        g.text for g in llm.generate(CHATS, Sampling(max_tokens=12))
    ]
    for g in greedy:
        assert 0 < len(g.token_ids) == len(g.logprobs) <= 12
        assert all(lp <= 0 for lp in g.logprobs) and g.prompt_ids
        assert g.text == llm.tokenizer.decode(g.token_ids, skip_special_tokens=True)
    hot = Sampling(max_tokens=12, temperature=1.0, seed=7)
    assert [g.token_ids for g in llm.generate(CHATS, hot)] == [
        g.token_ids for g in llm.generate(CHATS, hot)
    ]
    other = [
        g.token_ids for g in llm.generate(CHATS, Sampling(max_tokens=12, temperature=1.0, seed=8))
    ]
    assert other != [g.token_ids for g in llm.generate(CHATS, hot)]
    usage = llm.usage.snapshot()
    assert usage["calls"] == 6 * len(CHATS) and usage["tokens_out"] > 0 and usage["tokens_in"] > 0


def test_a_bfloat16_backend_keeps_bfloat16_weights_and_decodes_like_float32(
    tiny_model: Path,
) -> None:
    full, half = HFBackend(tiny_model), HFBackend(tiny_model, dtype="bfloat16")
    assert {p.dtype for p in half.model.parameters()} == {torch.bfloat16}
    assert half.name == f"{full.name}@bfloat16"  # cached responses stay apart
    greedy = Sampling(max_tokens=12)
    a, b = full.generate(CHATS, greedy), half.generate(CHATS, greedy)
    for x, y in zip(a, b, strict=True):
        assert y.logprobs and all(lp <= 0 for lp in y.logprobs)
        # The first token's logprob under both precisions agrees to bfloat16's resolution.
        if x.token_ids[0] == y.token_ids[0]:
            assert abs(x.logprobs[0] - y.logprobs[0]) < 0.1
    with pytest.raises(ValueError, match=r"llm\.options\.dtype='float16' is not one of"):
        HFBackend(tiny_model, dtype="float16")


def test_score_is_the_sum_of_token_logprobs(tiny_model: Path) -> None:
    llm = HFBackend(tiny_model)
    gen = llm.generate(CHATS[:1], Sampling(max_tokens=6))[0]
    head = llm.prompt_ids(CHATS[0])
    ids = torch.tensor([head + gen.token_ids])
    logits = llm.model(input_ids=ids).logits.float()
    manual = (
        torch.log_softmax(logits[0, :-1], -1)
        .gather(-1, ids[0, 1:, None])
        .squeeze(-1)[len(head) - 1 :]
    )
    assert manual.tolist() == pytest.approx(gen.logprobs, abs=1e-4)
    scores = llm.score(CHATS[0], ["open the fridge", "x"])
    assert len(scores) == 2 and all(s < 0 for s in scores)


def test_the_response_cache_hits_and_survives_corruption(tiny_model: Path, tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    llm = make_llm("hf", model=str(tiny_model), cache=path)
    first = llm.generate(CHATS, Sampling(max_tokens=8))
    again = llm.generate(CHATS, Sampling(max_tokens=8))
    assert [g.text for g in first] == [g.text for g in again] and all(g.cached for g in again)
    assert llm.usage.cache_hits == 3 and len(ResponseCache(path)) == 3
    for side in tmp_path.glob("cache.sqlite-*"):
        side.unlink()
    path.write_bytes(b"this is not a database" * 100)
    store = ResponseCache(path)
    assert len(store) == 0 and list(tmp_path.glob("cache.sqlite.corrupt-*"))
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM responses").fetchone() == (0,)


@pytest.fixture
def server(tiny_model: Path):
    import uvicorn

    from benchmark.llm.serve import create_app

    llm = HFBackend(tiny_model)
    # The socket is bound here and handed to the server, so no other test process can take the
    # port between choosing it and serving on it.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(llm, "tiny"), log_level="error"))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield llm, f"http://127.0.0.1:{port}/v1"
    srv.should_exit = True
    thread.join(10)


def test_the_openai_backend_through_the_local_server_matches_the_model(server) -> None:
    local, url = server
    remote = make_llm("openai", model="tiny", base_url=url, concurrency=3, max_retries=0)
    got = remote.generate(CHATS, Sampling(max_tokens=10))
    want = local.generate(CHATS, Sampling(max_tokens=10))
    assert [g.text for g in got] == [g.text for g in want]
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    for g, w in zip(got, want, strict=True):
        assert g.logprobs == pytest.approx(w.logprobs, abs=1e-5)
    assert remote.score(CHATS[0], ["open the fridge"]) == pytest.approx(
        local.score(CHATS[0], ["open the fridge"]), abs=1e-4
    )


def test_the_server_answers_malformed_requests_with_4xx(server) -> None:
    _, url = server
    bad = httpx.post(f"{url}/chat/completions", json={"model": "tiny"})
    assert bad.status_code == 400 and "messages" in bad.json()["error"]["message"]
    bad = httpx.post(
        f"{url}/chat/completions",
        json={"model": "tiny", "messages": [{"role": "robot", "content": "x"}]},
    )
    assert bad.status_code == 400
    bad = httpx.post(
        f"{url}/chat/completions",
        json={"model": "other", "messages": [{"role": "user", "content": "x"}]},
    )
    assert bad.status_code == 404 and "tiny" in bad.json()["detail"]
    assert httpx.get(f"{url}/models").json()["data"][0]["id"] == "tiny"


def test_unknown_backends_and_missing_models_fail_clearly() -> None:
    with pytest.raises(ValueError, match="valid backends"):
        make_llm("gpt5")
    with pytest.raises(ValueError, match="model directory"):
        make_llm("hf", model="/nonexistent")
    with pytest.raises(ValueError, match="base_url"):
        make_llm("openai", model="x")


OBJECTS = ["Apple|1|0|0", "Apple|2|0|0", "Fridge|5|0|0"]
AGENTS = ["agent_0", "agent_1"]


def test_plans_are_parsed_robustly_and_validated_against_the_scene() -> None:
    first = (
        "{'id': 's1', 'skill': 'pickup', 'target': 'Apple|1|0|0', 'after': [], 'agent': 'agent_0'}"
    )
    second = (
        '{"id": "s2", "skill": "put", "target": "Fridge|5|0|0", "after": ["s1"], '
        '"agent": "agent_0"}'
    )
    third = '{"id": "s3", "skill": "fly", "target": "Apple|2|0|0", "after": [], "agent": "agent_1"}'
    text = f"Sure! Here is the plan:\n```json\n[{first}, {second}, {third}]\n```\nGood luck"
    items = extract_json(text)
    assert items is not None and len(items) == 3
    plan = validate(items, set(OBJECTS), AGENTS, {"agent_1": ["open"]})
    assert plan.ok and [s.id for s in plan.subtasks] == ["s1", "s2"] and plan.invalid == 1
    assert "unknown skill 'fly'" in plan.errors[0]
    cyclic = validate(
        [
            {
                "id": "a",
                "skill": "pickup",
                "target": OBJECTS[0],
                "after": ["b"],
                "agent": "agent_0",
            },
            {
                "id": "b",
                "skill": "pickup",
                "target": OBJECTS[1],
                "after": ["a"],
                "agent": "agent_1",
            },
        ],
        set(OBJECTS),
        AGENTS,
        {},
    )
    assert "cycle" in cyclic.errors[0] and all(not s.after for s in cyclic.subtasks)
    assert extract_json("no plan today") is None


def test_plan_quality_against_the_checklist() -> None:
    plan = Decomposition(
        ok=True,
        invalid=1,
        subtasks=[
            Subtask("s1", "pickup", "Apple|1|0|0", (), "agent_0"),
            Subtask("s2", "put", "Fridge|5|0|0", ("s1",), "agent_0"),
            Subtask("s3", "pickup", "Apple|2|0|0", (), "agent_1"),
        ],
    )
    checklist = [
        Atom("inside", "Apple|1|0|0", "Fridge", True),
        Atom("inside", "Apple|2|0|0", "Fridge", True),
        Atom("isToggled", "LightSwitch|0|0|0", None, False),
    ]
    q = quality(plan, checklist, AGENTS)
    assert q["validity"] == pytest.approx(3 / 4)
    assert q["coverage"] == pytest.approx(2 / 3)
    assert q["parallelism"] == pytest.approx(2 / 3)
    assert q["balance"] == pytest.approx(1 / 2.0001)
    # A reply with no valid subtask: nothing valid, nothing covered, and no plan shape to
    # score (not the 1.0 of a serial plan or the 0.0 of a one-sided one).
    empty = quality(Decomposition(ok=False, invalid=2), checklist, AGENTS)
    assert empty == {"validity": 0.0, "coverage": 0.0, "parallelism": None, "balance": None}


def test_a_free_form_plan_without_json_is_an_error_naming_why(tiny_model: Path) -> None:
    from baselines.llm_support import load_prompt

    llm = HFBackend(tiny_model)
    template = load_prompt("decompose_v1")
    sampling = Sampling(max_tokens=40)
    free = decompose(llm, template, "Put the apples in the fridge.", OBJECTS, AGENTS, {}, sampling)
    # A randomly initialised model's 40 tokens hold no JSON list of subtasks.
    assert not free.ok and free.subtasks == []
    assert free.errors == ["no JSON list of subtasks in the reply"]
    chat = build_prompt(template, "Put the apples in the fridge.", OBJECTS, AGENTS, {})
    assert free.raw == llm.generate([chat], sampling)[0].text


class _Preferences:
    """Stands in for an LLM's ``score``: candidates rank by a fixed preference list (unlisted
    ones last), so a test decides what the planner would pick."""

    def __init__(self, subtasks: list[str], agents: list[str]) -> None:
        self.subtasks, self.agents = subtasks, agents

    def score(self, prompt: list[dict[str, str]], candidates: list[str]) -> list[float]:
        wanted = self.agents if prompt[-1]["content"] == "Which robot does it?" else self.subtasks
        return [-float(wanted.index(c)) if c in wanted else -100.0 for c in candidates]


def test_constrained_plans_follow_the_scores_within_the_capabilities() -> None:
    from baselines.llm_support import load_prompt

    template = load_prompt("decompose_v1")
    # The scorer wants agent_1 for everything, but agent_1 cannot pick up.
    llm = _Preferences(
        ["pickup Apple|1|0|0", "open Fridge|5|0|0", "pickup Apple|2|0|0", "done"],
        ["agent_1", "agent_0"],
    )

    def plan(capabilities: dict[str, list[str]], max_steps: int) -> Decomposition:
        return constrained_decompose(
            llm, template, "Put the apples in the fridge.", OBJECTS, AGENTS, capabilities, max_steps
        )

    full = plan({"agent_1": ["pickup"]}, max_steps=8)
    assert full.ok and full.errors == []
    assert full.subtasks == [
        Subtask("s1", "pickup", "Apple|1|0|0", (), "agent_0"),
        Subtask("s2", "open", "Fridge|5|0|0", (), "agent_1"),
        Subtask("s3", "pickup", "Apple|2|0|0", ("s1",), "agent_0"),
    ], "stops at 'done'; each agent's subtasks are chained"
    assert plan({"agent_1": ["pickup"]}, max_steps=2).subtasks == full.subtasks[:2]
    nobody_picks_up = plan({"agent_0": ["pickup"], "agent_1": ["pickup"]}, max_steps=8)
    assert nobody_picks_up.subtasks == [Subtask("s2", "open", "Fridge|5|0|0", (), "agent_1")]
    nothing = plan({}, max_steps=0)
    assert not nothing.ok and nothing.errors == ["empty plan"]


def test_llm_agents_turn_garbage_into_counted_failures(tiny_model: Path, llm_pool) -> None:
    from baselines.llm_agents.team import FALLBACK, LLMAgentsTeam, extract_action
    from benchmark.env import make_env
    from benchmark.llm.resources import LLMResources
    from benchmark.rollout import run_episode

    seen = ["Apple|1|0|0", "Fridge|5|0|0"]
    assert extract_action("I think I will pickup the apple now", seen) == "pickup Apple|1|0|0"
    assert (
        extract_action("navigate Fridge|5|0|0 | say all: going", seen)
        == "navigate Fridge|5|0|0 | say all: going"
    )
    assert extract_action("hmm... explore!", seen) == "explore"
    assert extract_action("the sky is blue", seen) is None
    team = LLMAgentsTeam(
        llm={"backend": "hf", "model": str(tiny_model)}, max_tokens=8, constrained=False
    )
    team.bind(LLMResources(llm_pool))
    env = make_env("switch_off_bedroom_v0", n_agents=2, seed=0)
    trace = run_episode(env, team, seed=0)
    m = team.metrics()
    assert m["llm/calls"] == sum(trace["final"]["decisions"].values()) > 0
    assert m["llm/tokens_out"] > 0
    # The random model's 8-token replies never hold an action: every decision is a counted
    # failure, answered with the fallback skill.
    assert m["llm/parse_fail_rate"] == 1.0
    played = [a.split(" | ")[0] for d in trace["decisions"] for a in d["actions"].values()]
    assert len(played) == m["llm/calls"] and set(played) == {FALLBACK}


@pytest.mark.slow
def test_smollm2_loads_from_its_wheel_and_generates() -> None:
    llm = make_llm("smollm2")
    gen = llm.generate([[{"role": "user", "content": "Name one fruit."}]], Sampling(max_tokens=8))[
        0
    ]
    assert gen.text and len(gen.token_ids) == len(gen.logprobs)


def test_a_cache_file_another_process_holds_locked_is_waited_for_not_moved_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite answers "database is locked" while another process sets a new cache file up;
    taking that for corruption would move the file, and the other process's entries, aside."""
    import sqlite3

    from benchmark.llm import cache as cache_module

    path = tmp_path / "shared.sqlite"
    ResponseCache(path).put("kept", {"text": "mine"})
    real = cache_module.ResponseCache._connect
    locked = {"left": 3}

    def busy(self):
        if locked["left"]:
            locked["left"] -= 1
            raise sqlite3.OperationalError("database is locked")
        return real(self)

    monkeypatch.setattr(cache_module.ResponseCache, "_connect", busy)
    store = ResponseCache(path)
    assert locked["left"] == 0 and store.get("kept") == {"text": "mine"}
    assert not list(tmp_path.glob("shared.sqlite.corrupt-*"))


def test_the_cache_is_safe_under_concurrent_processes(tmp_path: Path) -> None:
    import multiprocessing

    from helpers.llm_cache import write_keys

    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=write_keys, args=(path, 1000 * k)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    store = ResponseCache(path)
    assert len(store) == 450 and store.get("key-2149") == {"text": "2149"}
