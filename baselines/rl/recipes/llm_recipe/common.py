"""What the recipe's stages share: the training tasks, the committed adapters' names, the
seeds of each stage, and how a stage runs (a public command line, its output in a log)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The training tasks of three families, interleaved (episode k plays task k mod 13).
FAMILY_TASKS = (
    "transport_apple_fridge_v0",
    "switch_off_bedroom_v0",
    "search_phone_bedroom_v0",
    "transport_produce_fridge_v0",
    "switch_off_kitchen_v0",
    "search_produce_kitchen_v0",
    "transport_dishes_sink_v0",
    "switch_off_bathroom_v0",
    "search_toiletries_bathroom_v0",
    "transport_bed_tidy_v0",
    "switch_off_living_room_v0",
    "search_valuables_living_room_v0",
    "transport_sofa_tidy_v0",
)
PLANNER_TASKS = ("transport_apple_fridge_v0", "switch_off_bedroom_v0", "search_phone_bedroom_v0")
SHORT = {"llm_agents": "agents", "llm_planner": "planner"}
# The committed adapters' names: <prefix>-<stage>. llm_agents' are those of the v4 prompt (the
# earlier smollm2-agents-* adapters, v3, stay as the runs of the committed tables made them).
PREFIX = {"llm_agents": "smollm2-agents-v4", "llm_planner": "smollm2-planner"}
TEACHER = {"llm_agents": "heuristic", "llm_planner": "oracle"}
STAGES = ("sft", "dagger", "accuracy", "grpo", "tiny", "eval")
TINY = "sft-tiny-families"  # the tiny policy team trained on llm_agents' teacher episodes
TINY_DIR = "policy-tiny-families"  # its committed model directory in baselines/adapters/
PROMPT = "llm_agents_v4"
DAGGER_SEED = 100_000  # round r plays training-split seeds from r * DAGGER_SEED
GUARD_SEEDS = 2_000_000  # GRPO's guard evaluates val-split seeds from here (not llm_heldout's)


def run_module(args: list[str], log: Path) -> float:
    """Run ``python -m <args>``; its wall time (s). Output is appended to ``log``."""
    print("$ python -m", " ".join(args), flush=True)
    start = time.perf_counter()
    with log.open("a") as f:
        command = [sys.executable, "-m", *args]
        subprocess.run(command, check=True, stdout=f, stderr=subprocess.STDOUT)
    return round(time.perf_counter() - start, 1)


def last_json(log: Path) -> dict[str, Any]:
    """The last line of ``log`` that is a JSON object (what a stage printed as its result)."""
    for line in reversed(log.read_text().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"{log} holds no result line")


def task_list(tasks: list[str] | tuple[str, ...]) -> str:
    return "[" + ",".join(tasks) + "]"


def read_jsonl(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]
