"""The compatibility probe (``python -m benchmark.llm.compat``): its reading of replies, and a
real run against the benchmark's own server; and the ``openai`` backend's handling of a server
that answers a schema it does not take with a 5xx, through a mock transport."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from benchmark.llm import Constraint, Sampling, make_llm
from benchmark.llm.compat import (
    PICKS,
    classify_logprobs,
    classify_schema,
    classify_seed,
    error_shape,
    follows_schema,
    has_token_ids,
    main,
    markdown,
    wire_body,
)
from benchmark.llm.hf import HFBackend
from benchmark.llm.openai_backend import chat_request, refuses_constraint

CHAT = [{"role": "user", "content": "Put the apple in the fridge."}]
DECISION = Constraint(
    {"type": "object", "properties": {"action": {"enum": ["explore", "wait"]}}}, "decision"
)


def reply(text: str, tokens: list[str] | None = None, generated: int | None = None) -> dict:
    """A chat-completions reply with ``text`` and a logprob entry per token of ``tokens``."""
    content = [{"token": t, "logprob": -0.5, "top_logprobs": []} for t in tokens or []]
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": {"content": content} if tokens is not None else None,
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": generated, "total_tokens": 9},
    }


def test_schema_replies_are_classified_honoured_ignored_or_refused() -> None:
    good = json.dumps({"pick": PICKS[1]})
    assert follows_schema(good) and follows_schema(f' {{"pick" : "{PICKS[0]}"}}\n')
    assert not follows_schema('{"pick": "apple"}') and not follows_schema(None)
    assert not follows_schema(json.dumps({"pick": PICKS[0], "also": 1}))
    assert classify_schema(200, reply(good)) == "honoured"
    assert classify_schema(200, reply("An apple.")) == "ignored"
    assert classify_schema(500, {"error": {"message": "boom"}}) == "refused (HTTP 500)"
    assert classify_schema(422, "not json") == "refused (HTTP 422)"


def test_logprobs_token_ids_seed_and_error_bodies_are_read() -> None:
    assert classify_logprobs(reply("ab", ["a", "b"], generated=2)) == "every token"
    assert classify_logprobs(reply("ab", ["a"], generated=2)) == "1 of 2 tokens"
    assert classify_logprobs(reply("ab", None, generated=2)) == "none"
    assert classify_logprobs(reply("ab", ["a", "b"], generated=None)) == "returned"
    assert has_token_ids(reply("ab", ["token_id:3", "token_id:9"]))
    assert not has_token_ids(reply("ab", ["a", "token_id:9"])) and not has_token_ids(reply("a"))
    assert classify_seed("x", "x", "y") == "same seed, same text; other seed differs"
    assert classify_seed("x", "z", "x") == "same seed, different text; other seed, same text"
    assert classify_seed("x", None, "y") == "no text"
    assert error_shape(400, {"error": {"message": "bad"}}) == "HTTP 400, OpenAI error object"
    assert error_shape(404, {"detail": "no such model"}) == "HTTP 404, FastAPI detail"
    assert error_shape(500, "Internal Server Error") == "HTTP 500, other"
    row = {"server": "s", "response_format": "honoured", "seed": "same"}
    head, rule, line = markdown(row).splitlines()
    assert head.count("|") == rule.count("|") == line.count("|")
    assert line.startswith("| s | honoured |") and markdown(row, header=False) == line


def test_the_request_asks_for_logprobs_and_carries_the_schema_as_told() -> None:
    sampling = Sampling(max_tokens=12, stop=("\n",))
    free = wire_body(chat_request("m", CHAT, sampling))
    assert free["logprobs"] is True and free["top_logprobs"] == 0 and free["stop"] == ["\n"]
    assert free["return_tokens_as_token_ids"] is True and "extra_body" not in free
    assert "response_format" not in free and "structured_outputs" not in free
    rf = wire_body(chat_request("m", CHAT, sampling, DECISION))
    assert rf["response_format"]["json_schema"]["schema"] == DECISION.schema
    assert rf["stop"] is None
    so = wire_body(chat_request("m", CHAT, sampling, DECISION, "structured_outputs"))
    assert so["structured_outputs"]["json"] == DECISION.schema and "response_format" not in so
    assert "response_format" not in wire_body(chat_request("m", CHAT, sampling, DECISION, "none"))
    with pytest.raises(ValueError, match="structured='grammar' is not one of"):
        chat_request("m", CHAT, sampling, DECISION, "grammar")
    assert [s for s in (400, 401, 404, 422, 429, 500, 503) if refuses_constraint(s)] == [
        400,
        422,
        500,
        503,
    ]


def mock_backend(answer) -> tuple:
    """An ``openai`` backend whose requests go to ``answer(body) -> (status, json)``; and the
    list of the bodies it was sent."""
    from openai import OpenAI

    sent: list[dict] = []

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        status, payload = answer(body)
        return httpx.Response(status, json=payload)

    backend = make_llm("openai", model="m", base_url="http://mock/v1", max_retries=0)
    backend.client = OpenAI(
        base_url="http://mock/v1",
        api_key="EMPTY",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handle)),
    )
    return backend, sent


def test_a_schema_answered_with_a_5xx_falls_back_once_and_tokens_are_counted() -> None:
    def answer(body: dict) -> tuple[int, dict]:
        if body.get("response_format", {}).get("type") == "json_schema":
            return 500, {"error": {"message": "Input should be 'text' or 'json_object'"}}
        return 200, reply('{"action": "wait"}', ["{", "wait", "}"], generated=3)

    backend, sent = mock_backend(answer)
    gens = backend.generate([CHAT, CHAT], Sampling(max_tokens=8), [DECISION, None])
    assert [g.constrained for g in gens] == [False, False] and backend.refused == {"decision"}
    assert gens[0].logprobs == [-0.5] * 3 and gens[0].token_ids == [] and gens[0].tokens == 3
    assert backend.usage.tokens_out == 6
    before = len(sent)
    backend.generate([CHAT], Sampling(max_tokens=8), [DECISION])
    assert len(sent) == before + 1 and "response_format" not in sent[-1]  # not asked again


def test_errors_that_are_not_the_schema_s_are_raised() -> None:
    from openai import InternalServerError, NotFoundError

    down, _ = mock_backend(lambda body: (503, {"error": {"message": "overloaded"}}))
    with pytest.raises(InternalServerError):
        down.generate([CHAT], Sampling(max_tokens=8), [DECISION])
    assert down.refused == set()  # the request without the schema failed too
    missing, sent = mock_backend(lambda body: (404, {"error": {"message": "no model m"}}))
    with pytest.raises(NotFoundError):
        missing.generate([CHAT], Sampling(max_tokens=8), [DECISION])
    assert len(sent) == 1 and missing.refused == set()


@pytest.fixture
def server(tiny_model: Path):
    import uvicorn

    from benchmark.llm.serve import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    srv = uvicorn.Server(
        uvicorn.Config(create_app(HFBackend(tiny_model), "tiny"), log_level="error")
    )
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    srv.should_exit = True
    thread.join(10)


def test_the_probe_reads_the_benchmark_s_own_server(server, capsys) -> None:
    assert main(["--base-url", server, "--model", "tiny", "--server", "own"]) == 0
    out = capsys.readouterr().out.splitlines()
    row = json.loads(out[0])
    assert row == {
        "server": "own",
        "base_url": server,
        "response_format": "honoured",
        "structured_outputs": "ignored",
        "json_object_schema": "ignored",
        "logprobs": "every token",
        "logprobs_plain": "every token",
        "token_ids": "yes",
        "seed": "same seed, same text; other seed differs",
        "refused_schema": "refused (HTTP 400)",
        "error": "HTTP 400, OpenAI error object",
        "unknown_model": "HTTP 404",
    }
    assert out[1].startswith("| server |") and out[3].startswith("| own | honoured |")


def test_the_probe_says_when_it_cannot_reach_the_server(capsys) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    assert main(["--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m", "--json"]) == 1
    assert "no answer from" in capsys.readouterr().err
