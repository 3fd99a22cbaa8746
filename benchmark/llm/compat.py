"""``python -m benchmark.llm.compat --base-url URL --model NAME [--server LABEL] [--json]``: what
an OpenAI-compatible server does with the requests the ``openai`` backend sends.

Every request is the backend's own (:func:`~benchmark.llm.openai_backend.chat_request`, its
``extra_body`` merged into the JSON body as the ``openai`` client does), sent with ``httpx``.
The checks, each one or two requests:

- ``response_format``: the backend's default constraint, ``response_format`` ``json_schema``
  with a schema that allows only ``{"pick": <one of three made-up words>}``; ``honoured`` when
  the greedy reply is exactly that, ``ignored`` when the server answers with other text,
  ``refused (HTTP n)`` when it answers with an error.
- ``structured_outputs``: the same schema in vLLM's ``structured_outputs`` field
  (``llm.options.structured=structured_outputs``), classified alike.
- ``json_object_schema``: the same schema as ``{"type": "json_object", "schema": ...}``, the form
  llama-cpp-python's server reads (the backend does not send it), classified alike.
- ``logprobs``: whether the reply carries a logprob for every generated token (``usage``'s count),
  for some, or none; ``logprobs_plain``: the same for ``logprobs=true`` without the backend's
  ``top_logprobs=0``; ``token_ids``: whether its tokens come as ``token_id:<n>``
  (``return_tokens_as_token_ids``).
- ``seed``: at temperature 1, whether one seed gives the same text twice and another seed
  different text.
- ``refused_schema``: a schema no grammar engine compiles (a lookbehind pattern) in
  ``response_format``: ``refused (HTTP n)``, or ``accepted`` when the server answers anyway.
- ``error``: the status and the shape of the body answering a malformed request (a message whose
  role is ``robot``): ``OpenAI error object`` (``{"error": {"message": ...}}``), ``FastAPI
  detail`` (``{"detail": ...}``) or ``other``; ``unknown_model``: the status answering a model
  name the server does not serve.

It prints one JSON object (``--json``: only that) and a markdown table row with its header.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import httpx

from benchmark.llm.base import Chat, Constraint, Sampling
from benchmark.llm.openai_backend import chat_request

PICKS = ("zorblat-7", "quexiv-3", "plimmon-5")
SCHEMA = {
    "type": "object",
    "properties": {"pick": {"enum": list(PICKS)}},
    "required": ["pick"],
    "additionalProperties": False,
}
UNCOMPILABLE = {"type": "string", "pattern": "(?<=a)b"}  # lookbehind: no JSON-schema grammar
SCHEMA_TOKENS = 64  # room for the reply the schema allows, in any tokenizer
CHAT: Chat = [{"role": "user", "content": "Name a fruit."}]
STORY: Chat = [{"role": "user", "content": "Tell me a short story about a kitchen."}]
COLUMNS = (
    ("server", "server"),
    ("response_format", "response_format json_schema"),
    ("structured_outputs", "structured_outputs (extra body)"),
    ("json_object_schema", "json_object + schema"),
    ("logprobs", "logprobs"),
    ("logprobs_plain", "logprobs without top_logprobs"),
    ("token_ids", "token ids"),
    ("seed", "seed"),
    ("refused_schema", "uncompilable schema"),
    ("error", "malformed request"),
    ("unknown_model", "unknown model"),
)


def wire_body(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body the ``openai`` client sends for ``create(**kwargs)``."""
    body = {k: v for k, v in kwargs.items() if k != "extra_body"}
    body.update(kwargs.get("extra_body") or {})
    return body


def reply_text(reply: Any) -> str | None:
    """The first choice's message text of a chat-completions reply, or None."""
    try:
        return reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None


def follows_schema(text: str | None) -> bool:
    """Whether ``text`` is a JSON value :data:`SCHEMA` accepts."""
    try:
        value = json.loads(text or "")
    except ValueError:
        return False
    return isinstance(value, dict) and set(value) == {"pick"} and value["pick"] in PICKS


def classify_schema(status: int, reply: Any) -> str:
    """``honoured``, ``ignored`` or ``refused (HTTP n)`` for a request under :data:`SCHEMA`."""
    if status != 200:
        return f"refused (HTTP {status})"
    return "honoured" if follows_schema(reply_text(reply)) else "ignored"


def classify_logprobs(reply: Any) -> str:
    """``every token``, ``k of n tokens`` or ``none``: the logprobs a reply carries against the
    number of tokens its ``usage`` says were generated (``returned`` when it says none)."""
    try:
        content = reply["choices"][0]["logprobs"]["content"] or []
    except (KeyError, IndexError, TypeError):
        content = []
    values = [t.get("logprob") for t in content if isinstance(t, dict)]
    n = sum(v is not None for v in values)
    if n == 0:
        return "none"
    generated = (reply.get("usage") or {}).get("completion_tokens")
    if not generated:
        return "returned"
    return "every token" if n == generated else f"{n} of {generated} tokens"


def has_token_ids(reply: Any) -> bool:
    """Whether every logprob entry names its token as ``token_id:<n>``."""
    try:
        content = reply["choices"][0]["logprobs"]["content"] or []
    except (KeyError, IndexError, TypeError):
        return False
    return bool(content) and all(str(t.get("token", "")).startswith("token_id:") for t in content)


def classify_seed(first: str | None, again: str | None, other: str | None) -> str:
    """What seeding does at temperature 1, from the texts of seed s, seed s again and seed s+1."""
    if first is None or again is None or other is None:
        return "no text"
    same = "same seed, same text" if first == again else "same seed, different text"
    return same + ("; other seed differs" if other != first else "; other seed, same text")


def error_shape(status: int, body: Any) -> str:
    """``HTTP n, <shape>``: the shape of an error reply's JSON body."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        shape = "OpenAI error object" if "message" in body["error"] else "other"
    elif isinstance(body, dict) and "detail" in body:
        shape = "FastAPI detail"
    else:
        shape = "other"
    return f"HTTP {status}, {shape}"


class Probe:
    """The checks against one server."""

    def __init__(self, base_url: str, model: str, timeout: float = 120.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.http = httpx.Client(timeout=timeout)

    def post(self, body: dict[str, Any]) -> tuple[int, Any]:
        """The status and the JSON body (or text, when it is not JSON) answering ``body``."""
        resp = self.http.post(self.url, json=body)
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, resp.text

    def ask(
        self,
        chat: Chat = CHAT,
        sampling: Sampling | None = None,
        constraint: Constraint | None = None,
        structured: str = "response_format",
    ) -> tuple[int, Any]:
        """The backend's request for ``chat``, sent."""
        sampling = sampling or Sampling(max_tokens=SCHEMA_TOKENS)
        return self.post(
            wire_body(chat_request(self.model, chat, sampling, constraint, structured))
        )

    def run(self) -> dict[str, str]:
        """Every check, in order: what was found, by the keys the module's docstring names."""
        pick = Constraint(SCHEMA, "pick")
        row: dict[str, str] = {}
        row["response_format"] = classify_schema(*self.ask(constraint=pick))
        row["structured_outputs"] = classify_schema(
            *self.ask(constraint=pick, structured="structured_outputs")
        )
        body = wire_body(chat_request(self.model, CHAT, Sampling(max_tokens=SCHEMA_TOKENS)))
        body["response_format"] = {"type": "json_object", "schema": SCHEMA}
        row["json_object_schema"] = classify_schema(*self.post(body))

        status, reply = self.ask()
        if status != 200:
            raise RuntimeError(f"{self.url} answered a plain request with HTTP {status}: {reply}")
        row["logprobs"] = classify_logprobs(reply)
        row["token_ids"] = "yes" if has_token_ids(reply) else "no"
        plain = wire_body(chat_request(self.model, CHAT, Sampling(max_tokens=24)))
        del plain["top_logprobs"]
        status, reply = self.post(plain)
        row["logprobs_plain"] = classify_logprobs(reply) if status == 200 else f"HTTP {status}"

        texts = []
        for seed in (11, 11, 12):
            status, reply = self.ask(STORY, Sampling(max_tokens=32, temperature=1.0, seed=seed))
            texts.append(reply_text(reply) if status == 200 else None)
        row["seed"] = classify_seed(*texts)

        status, reply = self.ask(constraint=Constraint(UNCOMPILABLE, "lookbehind"))
        row["refused_schema"] = "accepted" if status == 200 else f"refused (HTTP {status})"

        bad = wire_body(chat_request(self.model, CHAT, Sampling(max_tokens=8)))
        bad["messages"] = [{"role": "robot", "content": "hi"}]
        row["error"] = error_shape(*self.post(bad))
        unknown = wire_body(chat_request(self.model + "-not-served", CHAT, Sampling(max_tokens=4)))
        status, _ = self.post(unknown)
        row["unknown_model"] = "served anyway" if status == 200 else f"HTTP {status}"
        return row


def markdown(row: dict[str, str], header: bool = True) -> str:
    """``row`` as a markdown table row (with the header and rule lines first)."""
    line = "| " + " | ".join(row.get(key, "") for key, _ in COLUMNS) + " |"
    if not header:
        return line
    head = "| " + " | ".join(title for _, title in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    return "\n".join([head, rule, line])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmark.llm.compat", description=__doc__)
    parser.add_argument("--base-url", required=True, help="the server's /v1 URL")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--server", help="the row's label (default: the model name)")
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    args = parser.parse_args(argv)
    try:
        found = Probe(args.base_url, args.model, args.timeout).run()
    except httpx.HTTPError as err:
        print(f"compat: no answer from {args.base_url}: {err}", file=sys.stderr)
        return 1
    except RuntimeError as err:
        print(f"compat: {err}", file=sys.stderr)
        return 1
    row = {"server": args.server or args.model, "base_url": args.base_url, **found}
    print(json.dumps(row))
    if not args.json:
        print(markdown(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
