"""Plays the first decisions of an ``llm_planner`` episode on the embedded SmolLM2 and prints its
own peak RSS: the child process of the planner memory test (a process of its own, so that the
figure is this planner's alone).

    python -m helpers.llm_memory '<team kwargs as JSON>' <decisions>
"""

from __future__ import annotations

import json
import resource
import sys

from baselines.llm_planner import LLMPlannerTeam
from benchmark.env import make_env
from benchmark.llm.resources import LLMPool, LLMResources


def main(kwargs: dict, decisions: int, task: str = "transport_produce_fridge_v0") -> dict:
    team = LLMPlannerTeam(llm={"backend": "smollm2"}, **kwargs)
    team.bind(LLMResources(LLMPool()))
    env = make_env(task, n_agents=2, seed=0, split="test")
    obs, _ = env.reset(seed=0)
    team.reset(list(env.possible_agents), env.task_info())
    for _ in range(decisions):
        if not env.agents:
            break
        obs, *_ = env.step(team.act(obs))
    return {
        **team.metrics(),
        "known_objects": len(team.known),
        "plan_ok": team.decomposition.ok,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]), int(sys.argv[2]))), flush=True)
