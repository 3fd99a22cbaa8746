"""``python -m baselines.rl.recipes.view_check``: can the teacher's decisions be read from a prompt?

The heuristic team plays episodes; at each of its decisions the acting agent's prompt is
rendered two ways by ``llm_agents``: with ``llm_agents_v3`` (``v3``: the nearest objects in
sight and the last actions) and with ``llm_agents_v4`` (``memory``: the agent's memory,
:mod:`baselines.llm_agents.memory`), and the teacher's action is compared with each:

* ``explore_beside_unsearched``: of the teacher's ``explore`` decisions with empty hands, the
  share taken while the prompt shows a closed container in sight that, by the prompt, nobody
  has searched (the teacher knew it had; a learner reading the prompt would open it). Holding
  something, the teacher explores to find where it goes, whatever containers are in sight;
* ``target_absent``: of the teacher's decisions on an object, the share whose object the prompt
  does not name (a learner cannot choose it);
* ``prompt_tokens``: the mean tokens of a decision's prompt (system and user message) in the
  embedded model's chat template, and ``decisions_per_episode``.

Both shares should be about 0 for a prompt a student can imitate from. One JSON line::

    python -m baselines.rl.recipes.view_check --episodes 12 --split train
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from baselines.heuristic.acting import CONTAINERS
from baselines.llm_agents import LLMAgentsTeam
from baselines.llm_agents.memory import MAX_UNSEARCHED
from benchmark.agents import Team, make_team
from benchmark.env import CollabEnv, EnvOptions
from benchmark.env.views import TaskInfo
from benchmark.rollout import run_episode
from benchmark.skills import is_targeted
from benchmark.teamkit import type_of_id

TASKS = ("transport_produce_fridge_v0", "switch_off_kitchen_v0", "search_produce_kitchen_v0")
VIEWS = ("v3", "memory")
V4 = "llm_agents_v4"  # the llm_agents prompt that shows the memory


def _named(text: str, handle: str) -> bool:
    return re.search(rf"(?<![\w|]){re.escape(handle)}(?![\w|])", text) is not None


class ViewChecker(Team):
    """Plays the heuristic team and, at each decision, records how each view reads it."""

    def __init__(self) -> None:
        self.teacher = make_team("heuristic")
        self.counts: Counter[str] = Counter()
        self.prompts: dict[str, list[list[dict[str, str]]]] = {v: [] for v in VIEWS}

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.teacher.reset(agent_ids, task_info)
        self.teams = {"v3": LLMAgentsTeam(llm=None), "memory": LLMAgentsTeam(llm=None, prompt=V4)}
        for team in self.teams.values():
            team.start(agent_ids, task_info)

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        deciding = [a for a in observations if observations[a]["needs_decision"]]
        texts: dict[str, dict[str, str]] = {a: {} for a in deciding}
        for a in deciding:
            for view, team in self.teams.items():
                team.observe(a, observations[a])
                chat = team.chat(a, observations[a])
                self.prompts[view].append(chat)
                texts[a][view] = chat[-1]["content"]
        actions = self.teacher.act(observations)
        for a in deciding:
            action = actions.get(a, "")
            self._count(a, observations[a], action, texts[a])
            for team in self.teams.values():
                team.acted(a, action)
        return actions

    def _count(self, agent: str, obs: dict[str, Any], action: str, texts: dict[str, str]) -> None:
        head = action.partition("| say")[0].strip()
        skill, _, target = head.partition(" ")
        self.counts["decisions"] += 1
        if skill == "explore" and not obs["holding"]:
            self.counts["explore"] += 1
            v3 = self.teams["v3"].names[agent]
            if any(
                type_of_id(o["objectId"]) in CONTAINERS
                and "closed" in o["state"].split(", ")
                and _named(texts["v3"], v3.shorten(o["objectId"]))
                for o in obs["visible"]
            ):
                self.counts["v3/explore_beside_unsearched"] += 1
            memory = self.teams["memory"].memory[agent]
            if any(memory.seen[o].in_sight for o in memory.unsearched()[:MAX_UNSEARCHED]):
                self.counts["memory/explore_beside_unsearched"] += 1
        elif is_targeted(skill) and target:
            self.counts["targeted"] += 1
            for view, team in self.teams.items():
                handle = team.names[agent].by_id.get(target)
                if handle is None or not _named(texts[view], handle):
                    self.counts[f"{view}/target_absent"] += 1

    def rewarded(self, rewards: dict[str, float]) -> None:
        self.teacher.rewarded(rewards)


def _tokens(prompts: list[list[dict[str, str]]]) -> float:
    from transformers import AutoTokenizer

    from benchmark.llm.smollm2 import smollm2_dir

    tokenizer = AutoTokenizer.from_pretrained(smollm2_dir())
    lengths = [
        len(
            tokenizer(
                tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
            )["input_ids"]
        )
        for chat in prompts
    ]
    return round(sum(lengths) / max(1, len(lengths)), 1)


def check_views(
    tasks: Sequence[str], episodes: int, split: str, seed_start: int, tokens: bool = True
) -> dict[str, Any]:
    """Play ``episodes`` heuristic episodes (2 agents, partial observability, messages on) of
    ``tasks`` in turn on ``split``, seeds from ``seed_start``; the figures of the module
    docstring."""
    checker = ViewChecker()
    solved = 0
    for k in range(episodes):
        options = EnvOptions(split=split, observability="partial", comm=True)
        env = CollabEnv(tasks[k % len(tasks)], n_agents=2, options=options)
        trace = run_episode(env, checker, seed=seed_start + k)
        solved += bool(trace["final"]["success"])
    c = checker.counts
    out: dict[str, Any] = {
        "bench": "view_check",
        "episodes": episodes,
        "solved": solved,
        "decisions_per_episode": round(c["decisions"] / max(1, episodes), 1),
        "empty_handed_explore_share": round(c["explore"] / max(1, c["decisions"]), 3),
    }
    for view in VIEWS:
        out[view] = {
            "explore_beside_unsearched": round(
                c[f"{view}/explore_beside_unsearched"] / max(1, c["explore"]), 3
            ),
            "target_absent": round(c[f"{view}/target_absent"] / max(1, c["targeted"]), 3),
        }
        if tokens:
            out[view]["prompt_tokens"] = _tokens(checker.prompts[view])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.rl.recipes.view_check", description=__doc__
    )
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--split", default="train")
    parser.add_argument("--seed-start", type=int, default=0)
    parser.add_argument("--no-tokens", action="store_true", help="skip the token counts")
    args = parser.parse_args(argv)
    result = check_views(args.tasks, args.episodes, args.split, args.seed_start, not args.no_tokens)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
