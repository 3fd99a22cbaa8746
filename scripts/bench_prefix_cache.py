"""Prompt-prefix KV reuse on the embedded SmolLM2: seconds per batched call with and without it.

    python scripts/bench_prefix_cache.py [--threads 2] [--calls 3] [--max-tokens 12]

A batch of 16 chats: 8 distinct system prompts of about 250 tokens (8 teams' static text), each
shared by 2 agents whose user messages (about 80 tokens) change at every call, as they do at every
decision. Greedy decoding, no response cache. For ``prefix_cache=64`` and ``prefix_cache=0``
(taking turns at each call) prints one JSON line with the wall and CPU seconds of each call (the
first with the cache encodes the prefixes; later ones reuse them), the prompt tokens run through
the model per call, and whether both settings decoded the same tokens. Timings on a shared
machine are noisy: compare the figures of one run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark.llm import Sampling, make_llm
from benchmark.llm.base import Chat
from benchmark.llm.prefix_cache import prefix_ids
from benchmark.skills import skill_names

ROOMS = ["kitchen", "bedroom", "bathroom", "living room", "office", "garage", "pantry", "hall"]
OBJECTS = ["Apple", "Mug", "Fridge", "Knife", "Lamp", "Bowl", "Towel", "Book", "Pan", "Bread"]


def system_prompt(team: int) -> str:
    """About 250 tokens of static text: the team's task, the rules and the skills."""
    room = ROOMS[team % len(ROOMS)]
    objects = ", ".join(f"{o}|+0{team}.{k}0|+00.90|-00.{k}5" for k, o in enumerate(OBJECTS[:3]))
    return (
        f"You control one robot of a team of two in the {room}. Task {team}: put every "
        f"{OBJECTS[team]} you find into the nearest receptacle and switch off the lights when the "
        "task is done. Each turn you choose exactly one action for your robot. Reply with a JSON "
        'object {"action": "<skill> <object>"} and, when it helps your teammate, a short '
        'message {"say": {"to": "all", "text": "..."}}. Never invent objects: use only the ids '
        "you were told about. If you hold something you must put it down before picking up "
        "another object. Opening a receptacle is needed before putting anything inside it. "
        f"Skills: {', '.join(skill_names())}. Known objects at the start: {objects}. "
        "Avoid doing what your teammate does."
    )


def user_message(team: int, agent: int, call: int) -> str:
    """About 80 tokens that change at every decision."""
    held = OBJECTS[(team + call) % len(OBJECTS)]
    return (
        f"You are agent_{agent}. Decision {call}. You hold the {held}. You see "
        f"{OBJECTS[(call + 1) % 10]}|+01.{call}0|+00.90|-00.50 and "
        f"{OBJECTS[(call + 2) % 10]}|-01.2{agent}|+00.00|+02.00. "
        f"Your teammate said: 'I am opening the {OBJECTS[(agent + call) % 10]}, then I will "
        f"search the {ROOMS[(team + 1) % 8]}.' Next action?"
    )


def batch(call: int) -> list[Chat]:
    return [
        [
            {"role": "system", "content": system_prompt(team)},
            {"role": "user", "content": user_message(team, agent, call)},
        ]
        for team in range(8)
        for agent in range(2)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=12)
    args = parser.parse_args()
    sampling = Sampling(max_tokens=args.max_tokens)
    llms = {size: make_llm("smollm2", threads=args.threads, prefix_cache=size) for size in (64, 0)}
    rows: dict[int, dict] = {}
    for size, llm in llms.items():
        llm.generate(batch(99)[:1], Sampling(max_tokens=2))  # load-time warm-up
        llm.clear_prefix_cache()
        pairs = [(c, llm.prompt_ids(c)) for c in batch(0)]
        rows[size] = {
            "prefix_cache": size,
            "seconds_per_call": [],
            "cpu_seconds_per_call": [],
            "prompt_tokens_encoded_per_call": [],
            "prompt_tokens_per_call": sum(len(p) for _, p in pairs),
            "prefix_tokens": sorted({len(prefix_ids(llm.tokenizer, c, p)) for c, p in pairs}),
            "threads": args.threads,
        }
    same = True
    for call in range(args.calls):
        # Both settings take turns at each call, so a busy machine slows both alike.
        ids = {}
        for size, llm in llms.items():
            before, wall, cpu = llm.tokens_encoded, time.perf_counter(), time.process_time()
            gens = llm.generate(batch(call), sampling)
            rows[size]["seconds_per_call"].append(round(time.perf_counter() - wall, 2))
            rows[size]["cpu_seconds_per_call"].append(round(time.process_time() - cpu, 2))
            rows[size]["prompt_tokens_encoded_per_call"].append(llm.tokens_encoded - before)
            ids[size] = [g.token_ids for g in gens]
        same = same and ids[64] == ids[0]
    rows[0]["same_tokens_as_prefix_cache_64"] = same
    for row in rows.values():
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
