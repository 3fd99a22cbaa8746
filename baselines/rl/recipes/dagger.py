"""DAgger for ``llm_agents``: the learner plays, the teacher labels the states it reaches.

In a DAgger episode the ``llm_agents`` team (the model being trained, with its adapter,
greedy and constrained as at test time) acts, and at each of its decisions the heuristic
teacher, fed the same observations, says what it would do there. The pair (the learner's
prompt, the teacher's decision as a reply) is a demonstration on the learner's own state
distribution: the states its own mistakes lead to, which the teacher's episodes never reach.

The teacher keeps its own memory from the observations it is fed, as when it plays; its memory
of what it meant to do (its claims, a container it meant to open) follows its own decisions,
not the learner's, so a label can be the teacher's plan from a state it would not have been in.
A label that names an object the agent has no handle for is skipped and counted.

Episodes are played ``batch`` at a time with their LLM calls batched
(:func:`benchmark.llm.batching.run_batched`); each finished episode's demonstrations are
appended to the output file at once, so a round interrupted goes on from the episodes not yet
in it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from baselines.llm_agents import LLMAgentsTeam
from baselines.rl.recipes.llm_demos import played_env, teacher_reply
from benchmark.agents import Team, make_team
from benchmark.env.views import TaskInfo
from benchmark.llm.batching import BatchSeat, run_batched
from benchmark.llm.resources import LLMPool, LLMResources
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode


class DaggerTeam(Team):
    """The ``learner`` acts; ``pairs`` holds (agent, learner's chat, teacher's reply)."""

    def __init__(self, learner: LLMAgentsTeam, teacher: Team) -> None:
        self.learner, self.teacher = learner, teacher

    def bind(self, resources: LLMResources) -> None:
        self.learner.bind(resources)
        self.teacher.bind(resources)

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.learner.reset(agent_ids, task_info)
        self.teacher.reset(agent_ids, task_info)
        self.pairs: list[tuple[str, list[dict[str, str]], str]] = []
        self.skipped = 0
        self.agreed = 0

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        deciding = [a for a in observations if observations[a]["needs_decision"]]
        labels = self.teacher.act(observations)
        actions = self.learner.act(observations)
        for a in deciding:
            schema = self.learner.constraint(a, observations[a]).schema
            reply = teacher_reply(self.learner, a, schema, labels.get(a, ""))
            if reply is None:
                self.skipped += 1
                continue
            self.pairs.append((a, self.learner.chats[a], reply))
            head = labels.get(a, "").partition("|")[0].strip()
            self.agreed += actions.get(a, "").partition("|")[0].strip() == head
        return actions

    def rewarded(self, rewards: dict[str, float]) -> None:
        self.learner.rewarded(rewards)
        self.teacher.rewarded(rewards)

    def metrics(self) -> dict[str, float]:
        return self.learner.metrics()

    def close(self) -> None:
        self.learner.close()
        self.teacher.close()


def _episode(
    task: str,
    seed: int,
    split: str,
    llm: dict[str, Any],
    prompt: str,
    llms: LLMPool,
    seat: BatchSeat | None = None,
) -> dict[str, Any]:
    env = played_env(task, split)
    team = DaggerTeam(LLMAgentsTeam(llm=llm, prompt=prompt), make_team("heuristic"))
    team.bind(LLMResources(llms, seat))
    try:
        trace = run_episode(env, team, seed=seed)
    finally:
        team.close()
    decisions = len(team.pairs) + team.skipped
    return {
        "task": task,
        "seed": seed,
        "SR": episode_metrics(trace)["SR"],
        "decisions": decisions,
        "skipped": team.skipped,
        "agreed": team.agreed,
        "demos": [
            {"task": task, "seed": seed, "agent": a, "chat": chat, "reply": reply}
            for a, chat, reply in team.pairs
        ],
    }


def _key(row: dict[str, Any]) -> tuple[str, int]:
    return (row["task"], row["seed"])


def collect(
    episodes: Sequence[tuple[str, int]],
    llm: dict[str, Any],
    out: Path,
    split: str = "train",
    prompt: str = "llm_agents_v4",
    batch: int = 6,
    log: Any = print,
) -> list[dict[str, Any]]:
    """Play the ``(task, seed)`` episodes with the learner ``llm`` (an ``llm`` config with its
    adapter, loaded once for all of them) and append each one's labelled decisions to ``out``
    (jsonl, one demonstration a line) and its summary to ``out``'s ``.episodes.jsonl`` sibling;
    episodes already there are not played again. The summaries of all the episodes."""
    llms = LLMPool()
    summaries_file = out.with_suffix(".episodes.jsonl")
    done: dict[tuple[str, int], dict[str, Any]] = {}
    if summaries_file.is_file():
        for line in summaries_file.open():
            row = json.loads(line)
            done[(row["task"], row["seed"])] = row
    if out.is_file():  # an episode whose summary was not written is played again: drop its rows
        kept = [line for line in out.open() if _key(json.loads(line)) in done]
        out.write_text("".join(kept))
    todo = [e for e in episodes if e not in done]
    for k in range(0, len(todo), batch):
        group = todo[k : k + batch]
        results, _ = run_batched(
            [functools.partial(_episode, t, s, split, llm, prompt, llms) for t, s in group]
        )
        for result in results:
            if isinstance(result, BaseException):
                raise result
            with out.open("a") as f:
                for demo in result.pop("demos"):
                    f.write(json.dumps(demo) + "\n")
            with summaries_file.open("a") as f:
                f.write(json.dumps(result) + "\n")
            done[(result["task"], result["seed"])] = result
        log(f"dagger: {len(done)}/{len(episodes)} episodes played")
    return [done[e] for e in episodes]


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", required=True, help="the learner: adapter name or directory")
    parser.add_argument("--out", type=Path, required=True, help="demonstrations file (jsonl)")
    parser.add_argument("--tasks", nargs="+", required=True)
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--seed-start", type=int, default=100_000)
    parser.add_argument("--split", default="train")
    parser.add_argument("--batch", type=int, default=6, help="episodes played at once")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="float32", help="the learner's weights (hf dtype)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    options = {} if args.dtype == "float32" else {"dtype": args.dtype}
    llm = {"backend": "smollm2", "model": "", "options": options, "adapter": args.adapter}
    episodes = [
        (args.tasks[k % len(args.tasks)], args.seed_start + k) for k in range(args.episodes)
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = collect(episodes, llm, args.out, args.split, batch=args.batch)
    decisions = sum(r["decisions"] for r in rows)
    print(
        json.dumps(
            {
                "episodes": len(rows),
                "learner_SR": sum(r["SR"] for r in rows) / len(rows),
                "decisions": decisions,
                "labelled": decisions - sum(r["skipped"] for r in rows),
                "agreement": sum(r["agreed"] for r in rows) / max(1, decisions),
            }
        )
    )


if __name__ == "__main__":
    main()
