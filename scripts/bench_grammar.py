"""Grammar-constrained decoding on the embedded SmolLM2: compile time and per-token overhead.

    python scripts/bench_grammar.py [--objects 30] [--repeats 3] [--libs llguidance,xgrammar,...]

For each structured-generation library that is installed (llguidance is a dependency;
``pip install xgrammar outlines-core`` adds the others), and for the two grammars the LLM
baselines build (a decision: 9 skills x ``--objects`` objects + plain skills and an optional
message; a plan: 8 subtasks over the objects, 2 agents), prints one JSON line per library with:

* ``compile_ms``: schema to the first token mask (best of ``--repeats``);
* ``mask_ms_per_step``: computing and applying the masks of one decoding step, at batch 1 and 4;
* ``forward_ms_per_step``: the model's own decoding step (free greedy decoding, same steps),
  and ``overhead``: mask time over forward time;
* ``valid``: constrained outputs that parse as JSON and pass the schema's checks.

Timings on a shared machine are noisy: compare the figures of one run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from baselines.llm_agents.team import decision_schema, read_decision
from benchmark.llm.hf import HFBackend
from benchmark.llm.smollm2 import smollm2_dir
from benchmark.llm.structured import JSON_OPTIONS
from benchmark.skills import skill_names
from benchmark.tasks.decompose import plan_schema, validate

TYPES = ["Apple", "Tomato", "Lettuce", "Fridge", "Cabinet", "CounterTop", "Sink", "Mug", "Pan"]


class Llguidance:
    def __init__(self, tokenizer: Any, vocab: int) -> None:
        from benchmark.llm.structured import Grammars

        self.grammars = Grammars(tokenizer, vocab, cache_size=0)

    def matcher(self, schema: dict) -> Any:
        from benchmark.llm.base import Constraint

        return self.grammars.matcher(Constraint(schema, "bench"))

    def fill(self, m: Any, mask: torch.Tensor, row: int) -> None:
        m.unsafe_compute_mask_ptr(mask[row].data_ptr(), mask[row].numel() * 4)

    def consume(self, m: Any, token: int) -> None:
        m.consume_token(token)

    def done(self, m: Any) -> bool:
        return m.is_stopped()


class Xgrammar:
    def __init__(self, tokenizer: Any, vocab: int) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab)
        self.compiler = xgr.GrammarCompiler(info, cache_enabled=False)

    def matcher(self, schema: dict) -> Any:
        compiled = self.compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(", ", ": ")
        )
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m: Any, mask: torch.Tensor, row: int) -> None:
        m.fill_next_token_bitmask(mask, row)

    def consume(self, m: Any, token: int) -> None:
        m.accept_token(token)

    def done(self, m: Any) -> bool:
        return m.is_terminated()


class OutlinesCore:
    def __init__(self, tokenizer: Any, vocab: int) -> None:
        import outlines_core as oc

        self.oc = oc
        # GPT-2 byte-level alphabet -> bytes, so that the index sees each token's real bytes.
        bs = [*range(33, 127), *range(161, 173), *range(174, 256)]
        cs, n = bs[:], 0
        for b in range(256):
            if b not in bs:
                bs.append(b)
                cs.append(256 + n)
                n += 1
        decode = {chr(c): b for b, c in zip(bs, cs, strict=True)}
        tokens: dict[bytes, list[int]] = {}
        for tok, i in tokenizer.get_vocab().items():
            if i != tokenizer.eos_token_id and tok not in tokenizer.all_special_tokens:
                tokens.setdefault(bytes(decode[c] for c in tok), []).append(i)
        self.vocabulary = oc.Vocabulary(tokenizer.eos_token_id, tokens)

    def matcher(self, schema: dict) -> Any:
        regex = self.oc.json_schema.build_regex_from_schema(json.dumps(schema), r"( )?")
        return self.oc.Guide(self.oc.Index(regex, self.vocabulary))

    def fill(self, m: Any, mask: torch.Tensor, row: int) -> None:
        m.write_mask_into(mask[row].data_ptr(), mask[row].numel(), 4)

    def consume(self, m: Any, token: int) -> None:
        m.advance(token)

    def done(self, m: Any) -> bool:
        return m.is_finished()


LIBS = {"llguidance": Llguidance, "xgrammar": Xgrammar, "outlines-core": OutlinesCore}


class Masking(LogitsProcessor):
    """One matcher per row (the same loop for every library), timed."""

    def __init__(self, lib: Any, matchers: list[Any], eos: int, vocab: int) -> None:
        self.lib, self.matchers, self.eos = lib, matchers, eos
        self.mask = torch.full((len(matchers), (vocab + 31) // 32), -1, dtype=torch.int32)
        self.shifts = torch.arange(32, dtype=torch.int32)
        self.ended = [False] * len(matchers)
        self.first, self.seconds, self.steps = True, 0.0, 0

    def __call__(self, ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        start = time.perf_counter()
        for r, m in enumerate(self.matchers):
            if not self.first and not self.ended[r]:
                token = int(ids[r, -1])
                self.ended[r] = token == self.eos
                if not self.ended[r]:
                    self.lib.consume(m, token)
            if self.ended[r] or self.lib.done(m):
                self.mask[r].zero_()
                self.mask[r, self.eos // 32] = 1 << (self.eos % 32)
            else:
                self.lib.fill(m, self.mask, r)
        self.first = False
        allowed = ((self.mask.unsqueeze(-1) >> self.shifts) & 1).bool()
        out = scores.masked_fill(
            ~allowed.reshape(len(self.matchers), -1)[:, : scores.shape[1]], -1e9
        )
        self.seconds += time.perf_counter() - start
        self.steps += 1
        return out


def _generate(llm: HFBackend, chat: list, rows: int, steps: int, proc: Masking | None) -> tuple:
    prompts = [llm.prompt_ids(chat)] * rows
    ids, attn = llm._pad_left(prompts)
    start = time.perf_counter()
    with torch.no_grad():
        out = llm.model.generate(
            input_ids=ids,
            attention_mask=attn,
            max_new_tokens=steps,
            do_sample=False,
            pad_token_id=llm.tokenizer.pad_token_id,
            logits_processor=LogitsProcessorList([proc]) if proc else None,
            **({} if proc else {"min_new_tokens": steps}),
        )
    new = out[:, ids.shape[1] :]
    texts = [llm.tokenizer.decode(r, skip_special_tokens=True) for r in new]
    return texts, new.shape[1], time.perf_counter() - start


def bench(name: str, llm: HFBackend, n_objects: int, repeats: int) -> dict[str, Any]:
    rng = random.Random(0)
    objects = [
        f"{rng.choice(TYPES)}|{rng.uniform(-3, 3):+06.2f}|{rng.uniform(0, 2):+06.2f}|"
        f"{rng.uniform(-3, 3):+06.2f}"
        for _ in range(n_objects)
    ]
    agents = ["agent_0", "agent_1"]
    schemas = {
        "decision": decision_schema(skill_names(), objects, ["all", "agent_1"]),
        "plan": plan_schema(objects, agents, {}, max_subtasks=8),
    }
    chats = {
        "decision": [
            {
                "role": "user",
                "content": "You are agent_0 of 2 robots. Task: put every apple in the fridge. "
                'Reply with one JSON object {"action": ...}. You see: ' + ", ".join(objects[:10]),
            }
        ],
        "plan": [
            {
                "role": "user",
                "content": "Plan the work of robots agent_0, agent_1: put every apple in the "
                "fridge. Objects:\n" + "\n".join(objects) + "\nReply with a JSON list of "
                "subtasks (id, agent, skill, target, after).",
            }
        ],
    }
    width = llm.model.get_output_embeddings().weight.shape[0]
    eos = llm.tokenizer.eos_token_id
    lib = LIBS[name](llm.tokenizer, width)
    out: dict[str, Any] = {"lib": name, "objects": n_objects, "json": JSON_OPTIONS}
    for kind, schema in schemas.items():
        compile_s = []
        for _ in range(repeats):
            start = time.perf_counter()
            m = lib.matcher(schema)
            lib.fill(m, torch.full((1, (width + 31) // 32), -1, dtype=torch.int32), 0)
            compile_s.append(time.perf_counter() - start)
        out[f"{kind}_compile_ms"] = round(1000 * min(compile_s), 2)
        for rows in (1, 4):
            steps = 48 if kind == "decision" else 160
            proc = Masking(lib, [lib.matcher(schema) for _ in range(rows)], eos, width)
            texts, taken, _ = _generate(llm, chats[kind], rows, steps, proc)
            free = min(_generate(llm, chats[kind], rows, taken, None)[2] for _ in range(repeats))
            valid = 0
            for t in texts:
                if kind == "decision":
                    valid += read_decision(t, schema, truncated=taken == steps) is not None
                else:
                    try:
                        items = json.loads(t)
                        valid += validate(items, set(objects), agents, {}).invalid == 0
                    except json.JSONDecodeError:
                        valid += taken == steps  # cut by the step budget
            mask_ms = 1000 * proc.seconds / proc.steps
            forward_ms = 1000 * free / taken
            out[f"{kind}_batch{rows}"] = {
                "steps": taken,
                "mask_ms_per_step": round(mask_ms, 2),
                "forward_ms_per_step": round(forward_ms, 1),
                "overhead": round(mask_ms / forward_ms, 4),
                "valid": f"{valid}/{rows}",
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--libs", default=",".join(LIBS))
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    llm = HFBackend(smollm2_dir(), name="SmolLM2-135M-Instruct")
    for name in args.libs.split(","):
        try:
            result = bench(name, llm, args.objects, args.repeats)
        except ImportError as err:
            result = {"lib": name, "skipped": f"not installed ({err})"}
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
