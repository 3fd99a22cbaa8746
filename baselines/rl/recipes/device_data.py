"""What the GPU check works on: decisions recorded from real episodes (``device_data.json``,
committed beside this file) and a SmolLM2-shaped model with random weights.

The GPU machine has no simulator assets and no network, so the check does not play episodes: it
generates and trains on decisions recorded here from real episodes of the smoke suite.

* ``llm_agents``: each decision of the ``llm_agents`` team (its default prompt): the chat, the
  decision schema it would be decoded under (the JSON-schema grammar of that moment) and a reply
  drawn from that schema (an allowed action, on some a message), which the team then acts on.
  Recording asks no model, so it takes seconds; the replies have the length and form of the
  team's decisions, which is what the check's timings depend on.
* ``policy``: each decision of the ``policy`` team with the committed tiny policy
  (``baselines/adapters/policy-tiny-families``): its agent-view prompt and reply as token ids of
  that policy's tokenizer.

``python -m baselines.rl.recipes.device_data`` records them again (minutes on 2 cores).

The model: SmolLM2-135M-Instruct's config and tokenizer (``.device/smollm2``, from ``make
device-check-bundle``, else the converted embedded model in the asset cache) with weights drawn
at random (:func:`random_model`).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import torch
import yaml

from benchmark.paths import CONFIGS_DIR, REPO_ROOT

DATA = Path(__file__).with_name("device_data.json")
BUNDLE = REPO_ROOT / ".device"
TINY_POLICY = REPO_ROOT / "baselines" / "adapters" / "policy-tiny-families"


def smoke_episodes(k: int) -> list[tuple[str, int]]:
    """``k`` episodes of the smoke suite: its tasks in order, then again with the next seeds."""
    entries = yaml.safe_load((CONFIGS_DIR / "suite" / "smoke.yaml").read_text())["entries"]
    tasks = [e["task"] for e in entries]
    return [(tasks[i % len(tasks)], i // len(tasks)) for i in range(k)]


class _SchemaReplies:
    """An LLM stand-in for recording: each reply is drawn from its chat's decision schema (an
    allowed action at random, and on some replies a short message to one allowed recipient),
    seeded; every chat, its schema and its reply are kept in ``calls``."""

    def __init__(self, seed: int = 0) -> None:
        from benchmark.llm.base import Usage

        self.usage = Usage()
        self.rng = random.Random(seed)
        self.calls: list[dict[str, Any]] = []

    def reply(self, schema: dict[str, Any]) -> str:
        props = schema["properties"]
        value: dict[str, Any] = {"action": self.rng.choice(props["action"]["enum"])}
        if "say" in props and self.rng.random() < 0.3:
            to = self.rng.choice(props["say"]["properties"]["to"]["enum"])
            value["say"] = {"to": to, "text": f"on it: {value['action']}"[:32]}
        return json.dumps(value)

    def generate(self, chats: list, sampling: Any, constraints: Any = None, seeds: Any = None):
        from benchmark.llm.base import Generation, per_chat

        out = []
        for chat, c in zip(chats, per_chat(constraints, len(chats)), strict=True):
            if c is None:
                raise ValueError("recording needs the team's decision schemas (constrained=true)")
            text = self.reply(dict(c.schema))
            self.calls.append({"chat": chat, "schema": dict(c.schema), "reply": text})
            out.append(Generation(text, [], [], [], "stop", constrained=True))
        return out


def _play(team: Any, task: str, seed: int, rounds: int) -> None:
    """The first ``rounds`` decision rounds of ``team`` in a fresh episode."""
    from benchmark.env import make_env

    env = make_env(task, n_agents=2, seed=seed, split="test")
    obs, _ = env.reset(seed=seed)
    team.reset(list(env.possible_agents), env.task_info())
    for _ in range(rounds):
        if not env.agents:
            break
        obs, rewards, _, _, _ = env.step(team.act(obs))
        team.rewarded(rewards)


def record_llm_agents(episodes: int = 12, rounds: int = 4) -> list[dict[str, Any]]:
    """Every ``llm_agents`` decision of the first ``rounds`` rounds of ``episodes`` smoke
    episodes, its replies drawn from its schemas (:class:`_SchemaReplies`)."""
    from benchmark.agents import make_team
    from benchmark.llm.resources import LLMPool, LLMResources

    class Recorded(LLMResources):
        """Lends the team the stand-in instead of the backend its config names."""

        def llm(self, backend: Any) -> Any:
            return replies

    replies = _SchemaReplies()
    llm = {"backend": "smollm2", "model": "", "options": {}}
    pool = LLMPool()  # the team loads its configured backend from it once, and never asks it
    for task, seed in smoke_episodes(episodes):
        team = make_team("llm_agents", resources=Recorded(pool), llm=llm)
        _play(team, task, seed, rounds)
    return replies.calls


def record_policy(episodes: int = 12, rounds: int = 8) -> list[dict[str, Any]]:
    """Every decision of the ``policy`` team with the tiny policy, as token ids."""
    from baselines.rl.core.policy_team import PolicyTeam

    out: list[dict[str, Any]] = []
    for task, seed in smoke_episodes(episodes):
        team = PolicyTeam(checkpoint=str(TINY_POLICY), seed=seed)
        _play(team, task, seed, rounds)
        out += [
            {"prompt_ids": d.prompt_ids, "gen_ids": d.gen_ids}
            for ds in team.decisions.values()
            for d in ds
        ]
    return out


def model_files() -> Path:
    """SmolLM2's config and tokenizer: the bundle's copy, else the converted embedded model."""
    if (BUNDLE / "smollm2" / "config.json").is_file():
        return BUNDLE / "smollm2"
    from benchmark.llm.smollm2 import smollm2_dir

    return smollm2_dir()


def random_model(files: Path, out: Path, quick: bool) -> Path:
    """A model directory in ``out`` with the tokenizer of ``files`` and random weights (seed 0):
    SmolLM2's own architecture from its config, or with ``quick`` a 2-layer, 64-wide Llama."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from benchmark.llm.tiny import save_tiny_llama

    tokenizer = AutoTokenizer.from_pretrained(files)
    if quick:
        return save_tiny_llama(out, tokenizer, hidden=64, tie_embeddings=True)
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(files)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def load(path: Path = DATA) -> dict[str, list[dict[str, Any]]]:
    """The recorded decisions: ``{"llm_agents": [...], "policy": [...]}``."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: record it with python -m baselines.rl.recipes.device_data"
        )
    return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record the decisions the GPU check uses.")
    parser.add_argument("--out", type=Path, default=DATA)
    parser.add_argument("--episodes", type=int, default=12)
    args = parser.parse_args(argv)
    data = {
        "llm_agents": record_llm_agents(args.episodes),
        "policy": record_policy(args.episodes),
    }
    args.out.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(
        f"{args.out}: {len(data['llm_agents'])} llm_agents and {len(data['policy'])} policy "
        f"decisions, {args.out.stat().st_size} bytes"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
