"""How well does a trained ``llm_agents`` model imitate its teacher? Accuracy by skill on
held-out decisions.

The held-out decisions are the heuristic teacher's, played on scenes and seeds that training
never used (by default val-split scenes, seeds from 2,000,000), each with the prompt
``llm_agents`` renders there and the decision schema it decodes under. The model answers
each prompt as the baseline would at test time (greedy, constrained by that schema), and its
action is compared with the teacher's, by the teacher's skill:

* ``action``: the same skill on the same object (the exact decision);
* ``skill``: the same skill;
* ``target``: of the decisions on an object, the same object named (whatever the skill);
* ``chosen`` (per skill): the skills the model chose there, with their counts.

Messages are not compared. The decisions are drawn per skill (at most ``per_skill`` of each,
evenly across the episodes), so a rare skill is measured as well as ``explore``.

    python -m baselines.rl.recipes.imitation --adapter smollm2-agents-sft --per-skill 40
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from baselines.llm_agents.team import read_decision
from baselines.rl.recipes.llm_demos import AgentsDemonstrator, played_env
from benchmark.agents import make_team
from benchmark.llm.base import Constraint, Sampling
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode
from benchmark.skills import skill_names

HELDOUT_SEED = 2_000_000  # first seed of held-out teacher episodes (training seeds are below)
PROMPT = "llm_agents_v4"


def action_of(reply: str) -> str:
    """The action line of a JSON decision (``{"action": "pickup Apple_1", ...}``)."""
    return str(json.loads(reply).get("action", "")).strip()


def skill_of(action: str) -> str:
    return action.split(" ", 1)[0]


def target_of(action: str) -> str | None:
    parts = action.split(" ", 1)
    return parts[1].strip() if len(parts) == 2 else None


def heldout_decisions(
    tasks: Sequence[str],
    episodes: int,
    per_skill: int,
    split: str = "val",
    seed_start: int = HELDOUT_SEED,
    prompt: str = PROMPT,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The teacher's decisions in ``episodes`` episodes (tasks in turn, successful episodes
    only): at most ``per_skill`` of each skill, drawn evenly. Each: task, seed, agent, chat,
    reply (the teacher's), schema. And the teacher's SR over the episodes."""
    by_skill: dict[str, list[dict[str, Any]]] = defaultdict(list)
    solved = []
    for k in range(episodes):
        task, seed = tasks[k % len(tasks)], seed_start + k
        env = played_env(task, split)
        team = AgentsDemonstrator(make_team("heuristic"), prompt)
        try:
            trace = run_episode(env, team, seed=seed)
        finally:
            team.close()
        solved.append(episode_metrics(trace)["SR"])
        if solved[-1] < 1:
            continue
        for (agent, chat, reply), schema in zip(team.pairs, team.schemas, strict=True):
            by_skill[skill_of(action_of(reply))].append(
                {
                    "task": task,
                    "seed": seed,
                    "agent": agent,
                    "chat": chat,
                    "reply": reply,
                    "schema": schema,
                }
            )
    drawn = []
    for skill in sorted(by_skill):
        rows = by_skill[skill]
        keep = min(per_skill, len(rows))
        drawn += [rows[k * len(rows) // keep] for k in range(keep)]
    return drawn, {"teacher_SR": sum(solved) / len(solved), "episodes": episodes}


def imitation_accuracy(
    llm: Any, decisions: Sequence[dict[str, Any]], batch: int = 8
) -> dict[str, dict[str, float]]:
    """Accuracy by the teacher's skill (and ``all``, and ``critical``: every skill but
    explore and wait) of ``llm`` (an :class:`~benchmark.llm.base.LLM`) answering the
    decisions greedily under their schemas: n, action, skill, target and, per skill, the
    skills chosen (see the module)."""
    sampling = Sampling(max_tokens=64, temperature=0.0, seed=0)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    confusion: dict[str, Counter[str]] = defaultdict(Counter)  # teacher's skill -> model's
    for k in range(0, len(decisions), batch):
        rows = decisions[k : k + batch]
        replies = llm.generate(
            [r["chat"] for r in rows],
            sampling,
            constraints=[Constraint(r["schema"], "decision") for r in rows],
        )
        for row, reply in zip(rows, replies, strict=True):
            want = action_of(row["reply"])
            line = read_decision(reply.text, row["schema"]) or ""
            got = line.partition("|")[0].strip()
            skill = skill_of(want)
            groups = ["all", skill] + ([] if skill in ("explore", "wait") else ["critical"])
            confusion[skill][skill_of(got) or "(none)"] += 1
            for group in groups:
                c = counts[group]
                c["n"] += 1
                c["action"] += got == want
                c["skill"] += skill_of(got) == skill
                if target_of(want) is not None:
                    c["targeted"] += 1
                    c["target"] += target_of(got) == target_of(want)
    order = ["all", "critical", *(s for s in skill_names() if s in counts)]
    table = {}
    for group in order:
        c = counts[group]
        row = {"n": c["n"], "action": c["action"] / c["n"], "skill": c["skill"] / c["n"]}
        if c["targeted"]:
            row["target"] = c["target"] / c["targeted"]
        table[group] = {k: round(v, 3) for k, v in row.items()}
        if group in confusion:
            table[group]["chosen"] = dict(confusion[group].most_common())
    return table


def format_table(table: dict[str, dict[str, float]]) -> list[str]:
    """The accuracy table in markdown."""
    lines = [
        "| skill | n | action | skill | target | chosen instead |",
        "|---|---|---|---|---|---|",
    ]
    for group, row in table.items():
        target = f"{row['target']:.2f}" if "target" in row else "-"
        others = [f"{k} {v}" for k, v in row.get("chosen", {}).items() if k != group][:3]
        lines.append(
            f"| {group} | {row['n']} | {row['action']:.2f} | {row['skill']:.2f} | {target} | "
            f"{', '.join(others) or '-'} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    from baselines.llm_support import config_llm
    from baselines.rl.recipes.llm_recipe.common import FAMILY_TASKS
    from benchmark.llm.resources import LLMPool

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", default=None, help="committed adapter name or directory")
    parser.add_argument("--episodes", type=int, default=24, help="held-out teacher episodes")
    parser.add_argument("--per-skill", type=int, default=40, help="decisions kept per skill")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dtype", default="float32", help="the model's weights (hf dtype)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    decisions, stats = heldout_decisions(FAMILY_TASKS, args.episodes, args.per_skill)
    options = {} if args.dtype == "float32" else {"dtype": args.dtype}
    llm = config_llm(
        {"backend": "smollm2", "model": "", "options": options, "adapter": args.adapter},
        LLMPool(),
    )
    table = imitation_accuracy(llm, decisions)
    print(json.dumps({"adapter": args.adapter, "dtype": args.dtype, **stats, "accuracy": table}))


if __name__ == "__main__":
    main()
