"""Per-agent metrics of one episode, and the same pooled per member of a mixed team.

A mixed team's trace names the member that played each agent (``members``); a homogeneous
team's does not, and every agent is then the one member ``default``. For each agent
(:func:`agent_metrics`), from the trace alone:

* ``credited``: checklist atoms credited to it (satisfied at the end, its action last made
  them true; :func:`benchmark.metrics.episode.credited_atoms`);
* ``actions``: its accepted, successful decisions other than ``wait`` (its workload);
* ``decisions``: every decision it made;
* ``messages`` and ``message_tokens``: what it sent;
* ``influence_pairs`` and ``influenced``: of the delivered (message, recipient) pairs it sent
  (:func:`benchmark.metrics.episode.influence_pairs`), how many there were and how many
  changed the recipient's next subtask; ``influenced_by_pairs`` and ``influenced_by`` the same
  for the messages it received.

:func:`member_metrics` sums them over each member's agents and adds its shares of the team's
credit and workload (``credit_share``, ``workload_share``: None when the team has none) and its
``influence_rate`` (influenced / pairs of what it sent; None without pairs).
"""

from __future__ import annotations

from typing import Any

from benchmark.metrics.episode import credited_atoms, influence_pairs, trace_agents
from benchmark.skills import skill_of_primitive

COUNTS = (
    "credited",
    "actions",
    "decisions",
    "messages",
    "message_tokens",
    "influence_pairs",
    "influenced",
    "influenced_by_pairs",
    "influenced_by",
)
DEFAULT_MEMBER = "default"


def agent_metrics(trace: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Every agent's counts (see the module docstring), by agent name."""
    agents = trace_agents(trace)
    out = {a: dict.fromkeys(COUNTS, 0) for a in agents}
    for agent, credited in credited_atoms(trace).items():
        out[agent]["credited"] = credited
    for rec in trace["skills"]:
        mine = out[rec["agent"]]
        mine["decisions"] += 1
        if (
            rec["accepted"]
            and rec["success"] is not False
            and skill_of_primitive(rec["skill"]) != "wait"
        ):
            mine["actions"] += 1
    for msg in trace["messages"]:
        out[msg["sender"]]["messages"] += 1
        out[msg["sender"]]["message_tokens"] += msg["tokens"]
    for sender, recipient, influenced in influence_pairs(trace):
        out[sender]["influence_pairs"] += 1
        out[sender]["influenced"] += influenced
        out[recipient]["influenced_by_pairs"] += 1
        out[recipient]["influenced_by"] += influenced
    return out


def _share(part: float, whole: float) -> float | None:
    return part / whole if whole else None


def pooled(counts: dict[str, int], team: dict[str, int]) -> dict[str, Any]:
    """Summed counts of some agents with their shares of ``team``'s totals and their rate."""
    return {
        **counts,
        "credit_share": _share(counts["credited"], team["credited"]),
        "workload_share": _share(counts["actions"], team["actions"]),
        "influence_rate": _share(counts["influenced"], counts["influence_pairs"]),
    }


def sum_counts(parts: list[dict[str, int]]) -> dict[str, int]:
    return {name: sum(p[name] for p in parts) for name in COUNTS}


def member_metrics(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each member's pooled metrics (see the module docstring), by member label, with
    ``agents``: how many agents it played."""
    per_agent = agent_metrics(trace)
    members = trace.get("members") or dict.fromkeys(per_agent, DEFAULT_MEMBER)
    team = sum_counts(list(per_agent.values()))
    out: dict[str, dict[str, Any]] = {}
    for label in dict.fromkeys(members[a] for a in per_agent):
        mine = [per_agent[a] for a in per_agent if members[a] == label]
        out[label] = {"agents": len(mine), **pooled(sum_counts(mine), team)}
    return out


def seat_metrics(trace: dict[str, Any], agent: str) -> dict[str, Any]:
    """One agent's pooled metrics (its shares of the team's credit and workload): how the agent
    in a seat did, whoever played it."""
    per_agent = agent_metrics(trace)
    if agent not in per_agent:
        raise ValueError(f"the episode has no {agent}; its agents are {sorted(per_agent)}")
    return pooled(per_agent[agent], sum_counts(list(per_agent.values())))
