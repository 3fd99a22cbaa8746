"""``python -m benchmark.llm.serve model=smollm2 port=8000``: serve a local backend over the
OpenAI chat-completions API (with logprobs), on loopback by default.

Keys (``key=value`` arguments): ``model`` (smollm2, or hf with ``model_dir=<dir>``), ``host``
(default 127.0.0.1), ``port`` (default 8000), ``name`` (the served model id), ``schema``
(``honour``, default, or ``ignore``). One model then serves many Ray workers through the
``openai`` backend. Malformed requests get 4xx answers that say what was wrong. Requests are
served one generation at a time (the model is not re-entrant).

``response_format`` ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}`` (and
``json_object``) is honoured by decoding under the schema (the backend's constraint: llguidance on
hf/smollm2); a schema that cannot be compiled gets a 400 naming the problem. ``schema=ignore``
serves like a server without structured outputs (it accepts the field and decodes free-form),
which is how tests exercise the client's fallback.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from benchmark.llm.base import LLM, Constraint, ConstraintError, Sampling


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str = Field(pattern="^(system|user|assistant)$")
    content: str


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    name: str = "output"
    json_schema: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    messages: list[Message] = Field(min_length=1)
    max_tokens: int = Field(default=64, ge=1, le=4096)
    temperature: float = Field(default=0.0, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int = Field(default=1, ge=1, le=1)
    logprobs: bool = False
    return_tokens_as_token_ids: bool = False
    response_format: ResponseFormat | None = None


class CompletionRequest(BaseModel):
    """Scoring only: the log-likelihood of ``candidate`` as the reply to ``chat``."""

    model_config = ConfigDict(extra="ignore")
    model: str
    chat: list[Message] = Field(min_length=1)
    candidate: str
    echo: bool = True


def _constraint(fmt: ResponseFormat | None) -> Constraint | None:
    """The constraint a ``response_format`` asks for (None for text); 400 when it is malformed."""
    if fmt is None or fmt.type == "text":
        return None
    try:
        if fmt.type == "json_object":
            return Constraint({"type": "object"}, "json_object")
        if fmt.json_schema is None:
            raise ConstraintError("response_format json_schema needs a 'json_schema' object")
        return Constraint(fmt.json_schema.json_schema, fmt.json_schema.name)
    except ConstraintError as err:
        raise HTTPException(400, detail=f"invalid response_format: {err}") from err


def create_app(llm: LLM, served_name: str, honour_schema: bool = True) -> FastAPI:
    """The server over ``llm``; ``honour_schema=False`` accepts ``response_format`` and ignores
    it (a server without structured outputs)."""
    app = FastAPI(title="collab-bench LLM server")
    lock = threading.Lock()

    @app.exception_handler(RequestValidationError)
    async def bad_request(_: Request, err: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        return JSONResponse(
            status_code=400,
            content={
                "error": {
                    "message": f"invalid request: {problems}",
                    "type": "invalid_request_error",
                }
            },
        )

    def check_model(name: str) -> None:
        if name != served_name:
            raise HTTPException(
                404, detail=f"model {name!r} is not served here; use {served_name!r}"
            )

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": served_name, "object": "model", "owned_by": "local"}],
        }

    @app.post("/v1/chat/completions")
    def chat(req: ChatRequest) -> dict[str, Any]:
        check_model(req.model)
        stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
        sampling = Sampling(
            max_tokens=req.max_tokens,
            temperature=req.temperature,
            top_p=req.top_p,
            seed=req.seed or 0,
            stop=stop,
        )
        constraint = _constraint(req.response_format) if honour_schema else None
        with lock:
            try:
                gen = llm.generate(
                    [[m.model_dump() for m in req.messages]],
                    sampling,
                    [constraint] if constraint is not None else None,
                )[0]
            except ConstraintError as err:
                raise HTTPException(400, detail=f"invalid response_format: {err}") from err
        tokenizer = getattr(llm, "tokenizer", None)
        content = None
        if req.logprobs:
            content = [
                {
                    "token": f"token_id:{t}"
                    if req.return_tokens_as_token_ids or tokenizer is None
                    else tokenizer.decode([t]),
                    "logprob": lp,
                    "bytes": None,
                    "top_logprobs": [],
                }
                for t, lp in zip(gen.token_ids, gen.logprobs, strict=True)
            ]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": served_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": gen.text},
                    "finish_reason": gen.finish_reason,
                    "logprobs": {"content": content} if content is not None else None,
                }
            ],
            "usage": {
                "prompt_tokens": len(gen.prompt_ids),
                "completion_tokens": len(gen.token_ids),
                "total_tokens": len(gen.prompt_ids) + len(gen.token_ids),
            },
            "prompt_token_ids": gen.prompt_ids,
        }

    @app.post("/v1/completions")
    def completions(req: CompletionRequest) -> dict[str, Any]:
        check_model(req.model)
        with lock:
            total = llm.score([m.model_dump() for m in req.chat], [req.candidate])[0]
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": served_name,
            "choices": [
                {
                    "index": 0,
                    "text": req.candidate,
                    "finish_reason": "length",
                    "logprobs": {"tokens": [req.candidate], "token_logprobs": [total]},
                }
            ],
        }

    return app


def parse_args(argv: list[str]) -> dict[str, str]:
    valid = {"model", "model_dir", "host", "port", "name", "cache", "schema"}
    args = {"model": "smollm2", "host": "127.0.0.1", "port": "8000", "schema": "honour"}
    for item in argv:
        key, sep, value = item.partition("=")
        if not sep or key not in valid:
            raise SystemExit(f"unknown argument {item!r}; use key=value with keys {sorted(valid)}")
        args[key] = value
    if args["schema"] not in ("honour", "ignore"):
        raise SystemExit(f"schema={args['schema']!r} must be honour or ignore")
    return args


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    from benchmark.llm import make_llm

    args = parse_args(sys.argv[1:] if argv is None else argv)
    llm = make_llm(args["model"], model=args.get("model_dir", ""), cache=args.get("cache"))
    name = args.get("name", llm.name)
    uvicorn.run(
        create_app(llm, name, honour_schema=args["schema"] == "honour"),
        host=args["host"],
        port=int(args["port"]),
        log_level="warning",
    )


if __name__ == "__main__":
    main()
