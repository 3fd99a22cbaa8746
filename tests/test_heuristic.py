"""The communicating heuristic team: messages and claims appear in traces, and on the search
family communication makes the team faster without costing success."""

from __future__ import annotations

import numpy as np
import pytest

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode
from benchmark.tasks.spec import task_registry

SEARCH = sorted(t.id for t in task_registry().values() if t.family == "search")
SEEDS = range(6)


@pytest.fixture(scope="module")
def paired() -> dict[bool, list[tuple[dict, dict]]]:
    out: dict[bool, list[tuple[dict, dict]]] = {True: [], False: []}
    for task in SEARCH:
        for n in (2, 3):
            for seed in SEEDS:
                for comm in (True, False):
                    trace = run_episode(
                        make_env(task, n_agents=n, seed=seed, comm=comm),
                        make_team("heuristic"),
                        seed=seed,
                    )
                    out[comm].append((trace, episode_metrics(trace)))
    return out


def test_messages_and_claims_appear_in_traces(paired) -> None:
    texts = [m["text"] for trace, _ in paired[True] for m in trace["messages"]]
    assert any(t.startswith("claim ") for t in texts)
    assert any(t.startswith("found ") for t in texts)
    assert any(t.startswith("searched ") for t in texts)
    assert all(m["delivered"] for trace, _ in paired[True] for m in trace["messages"])
    assert not any(m["delivered"] for trace, _ in paired[False] for m in trace["messages"])


def test_comm_on_beats_comm_off_on_the_search_family(paired) -> None:
    def mean(comm: bool, metric: str) -> float:
        return float(np.mean([m[metric] for _, m in paired[comm]]))

    assert mean(True, "L") < mean(False, "L"), (mean(True, "L"), mean(False, "L"))
    assert mean(True, "SR") >= mean(False, "SR")
    assert mean(True, "redundancy") < mean(False, "redundancy")


def test_the_heuristic_works_under_partial_observability_only() -> None:
    env = make_env(SEARCH[0], n_agents=2, seed=0)
    env.reset()
    assert env.task_info().privileged is None
    trace = run_episode(env, make_team("heuristic"), seed=0)
    assert any(s["skill"] == "explore" for s in trace["skills"])
