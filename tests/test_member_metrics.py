"""Per-agent metrics per member of a mixed team (benchmark.metrics.members): on real episodes
of the embedded simulator, each member's counts add up to the episode's own metrics, and who did
what is attributed to the member that played the agent."""

from __future__ import annotations

import pytest

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.metrics.episode import episode_metrics
from benchmark.metrics.members import agent_metrics, member_metrics, seat_metrics
from benchmark.results.members import member_table
from benchmark.rollout import run_episode
from benchmark.tasks.spec import load_task

TASK = "transport_apple_fridge_v0"


def _episode(members: list[dict], seed: int) -> dict:
    env = make_env(load_task(TASK), n_agents=2, seed=seed, split="test")
    team = make_team("mixed", members=members)
    return run_episode(env, team, seed=seed)


@pytest.fixture(scope="module")
def silent_partner() -> dict:
    return _episode(
        [
            {"agents": [0], "baseline": "heuristic", "label": "focal"},
            {"baseline": "heuristic", "kwargs": {"silent": True}, "label": "silent"},
        ],
        seed=0,
    )


def test_member_counts_add_up_to_the_episode_metrics(silent_partner: dict) -> None:
    trace = silent_partner
    metrics = episode_metrics(trace)
    members = member_metrics(trace)
    assert set(members) == {"focal", "silent"}
    assert sum(m["credited"] for m in members.values()) == sum(metrics["credited"])
    assert sum(m["messages"] for m in members.values()) == metrics["messages"]
    assert sum(m["decisions"] for m in members.values()) == metrics["L_decisions"]
    pairs = sum(m["influence_pairs"] for m in members.values())
    influenced = sum(m["influenced"] for m in members.values())
    assert pairs and influenced / pairs == pytest.approx(metrics["influence_rate"])
    shares = [m["credit_share"] for m in members.values()]
    assert sum(shares) == pytest.approx(1.0)


def test_what_an_agent_did_is_its_members(silent_partner: dict) -> None:
    trace = silent_partner
    members = member_metrics(trace)
    sent = {a: sum(m["sender"] == a for m in trace["messages"]) for a in ("agent_0", "agent_1")}
    assert sent["agent_1"] == 0 < sent["agent_0"]  # the silent partner plays agent_1
    assert members["silent"]["messages"] == 0 and members["silent"]["influence_rate"] is None
    assert members["focal"]["messages"] == sent["agent_0"]
    credited = episode_metrics(trace)["credited"]
    assert members["focal"]["credited"] == credited[0]
    assert seat_metrics(trace, "agent_1")["credited"] == credited[1]
    # what agent_1 received from agent_0 is what agent_0 sent
    per_agent = agent_metrics(trace)
    assert per_agent["agent_1"]["influenced_by_pairs"] == per_agent["agent_0"]["influence_pairs"]
    with pytest.raises(ValueError, match="no agent_5"):
        seat_metrics(trace, "agent_5")


def test_a_homogeneous_team_is_one_member_and_is_not_tabled(silent_partner: dict) -> None:
    env = make_env(load_task(TASK), n_agents=2, seed=1, split="test")
    trace = run_episode(env, make_team("heuristic"), seed=1)
    assert "members" not in trace
    (only,) = member_metrics(trace).values()
    assert only["agents"] == 2 and only["credit_share"] in (1.0, None)
    row = {"status": "ok", "reference": False, "baseline": "heuristic", "comm": True, "n_agents": 2}
    assert member_table([row], lambda r: trace) == []
    mixed_row = {**row, "baseline": "mix", "members": silent_partner["members"]}
    table = member_table([mixed_row, mixed_row], lambda r: silent_partner)
    assert {r["member"] for r in table} == {"focal", "silent"}
    focal = next(r for r in table if r["member"] == "focal")
    assert focal["episodes"] == 2
    assert focal["messages"] == member_metrics(silent_partner)["focal"]["messages"]
