"""Per-agent metrics reported per member type: who in a mixed team did the work and the talking.

For every group of a run's episodes (row ``baseline``, comm setting, team size) whose traces name
their members, :func:`member_table` pools each member's counts over the group's episodes
(:func:`benchmark.metrics.members.member_metrics`): its share of the atoms credited and of the
successful actions (credit and workload), the messages it sent per episode, and the share of its
delivered messages after which the recipient changed its next subtask (influence), and of the
messages it received after which it changed its own. ``members.md`` in the run directory holds
the table (:func:`write_members`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.metrics.members import COUNTS, member_metrics, sum_counts
from benchmark.results.markdown import markdown_table

Row = Mapping[str, Any]


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def member_table(
    rows: Sequence[Row], load_trace: Callable[[Row], dict[str, Any]]
) -> list[dict[str, Any]]:
    """One record per (baseline, comm, n_agents, member) over the ok rows with ``members``."""
    totals: dict[tuple, Counter[str]] = {}  # the member's counts and its teams', summed
    agents: dict[tuple, int] = {}
    for row in rows:
        if row.get("status") != "ok" or row.get("reference") or not row.get("members"):
            continue
        per_member = member_metrics(load_trace(row))
        team = sum_counts(list(per_member.values()))
        for label, counts in per_member.items():
            key = (row["baseline"], row["comm"], row["n_agents"], label)
            total = totals.setdefault(key, Counter())
            total.update({name: counts[name] for name in COUNTS})
            total.update(team_credited=team["credited"], team_actions=team["actions"], episodes=1)
            agents[key] = counts["agents"]
    out = []
    for key in sorted(totals, key=lambda k: str(k[:3])):  # members in order of appearance
        total = totals[key]
        out.append(
            {
                **dict(zip(("baseline", "comm", "n_agents", "member"), key, strict=True)),
                "agents": agents[key],
                "episodes": total["episodes"],
                "credit_share": _rate(total["credited"], total["team_credited"]),
                "workload_share": _rate(total["actions"], total["team_actions"]),
                "messages": total["messages"] / total["episodes"],
                "influence_rate": _rate(total["influenced"], total["influence_pairs"]),
                "influenced_by_rate": _rate(total["influenced_by"], total["influenced_by_pairs"]),
            }
        )
    return out


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def members_markdown(table: Sequence[Mapping[str, Any]]) -> str:
    head = (
        "baseline",
        "comm",
        "n",
        "member",
        "agents",
        "episodes",
        "credit share",
        "workload share",
        "messages / episode",
        "influence (sent)",
        "influenced (received)",
    )
    rows = [
        [
            r["baseline"],
            "on" if r["comm"] else "off",
            *map(_fmt, (r["n_agents"], r["member"], r["agents"], r["episodes"])),
            *map(_fmt, (r["credit_share"], r["workload_share"], r["messages"])),
            *map(_fmt, (r["influence_rate"], r["influenced_by_rate"])),
        ]
        for r in table
    ]
    return "\n".join(markdown_table(head, rows)) + "\n"


def write_members(
    root: Path, rows: Sequence[Row], load_trace: Callable[[Row], dict[str, Any]]
) -> list[dict[str, Any]]:
    """``members.md`` in run directory ``root`` when its episodes had mixed teams; the records."""
    table = member_table(rows, load_trace)
    if table:
        title = "# Per member: credit, workload, messages and influence in mixed teams\n\n"
        note = (
            "Pooled over each group's episodes: credit share = atoms credited to the member's "
            "agents / atoms credited to the team; workload share = its successful actions "
            "(other than wait) / the team's; influence (sent) = delivered (message, recipient) "
            "pairs it sent after which the recipient's next subtask changed / such pairs; "
            "influenced (received) = the same for the messages its agents received.\n\n"
        )
        (root / "members.md").write_text(title + note + members_markdown(table))
    return table
