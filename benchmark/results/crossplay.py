"""Cross-play: a focal team with held-out partners against itself, on the same episodes.

A run with ``partners=<population>`` (``configs/partners/``) plays every multi-agent episode
twice or more: the focal team alone (self-play, the row's ``baseline`` is the focal team's
name) and, for each member of the population, the focal team on ``agent_0`` with that partner
on the other agents (the row's ``baseline`` is ``<focal>+<partner>`` and its ``partner`` the
member's label). :func:`crossplay_table` pairs each partner's episodes with the self-play
episode of the same task, split, seed, team size and comm setting, and reports the ad-hoc
teamwork gap: SR with exact intervals in both, the SR difference (self-play minus cross-play)
with McNemar's exact p on the discordant pairs, and TR and the collaboration metrics' means in
both with the paired t interval of the TR difference.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from benchmark.metrics.members import seat_metrics
from benchmark.metrics.stats import clopper_pearson, mcnemar_exact, t_interval
from benchmark.paths import CONFIGS_DIR
from benchmark.results.markdown import markdown_table

LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
POPULATIONS_DIR = CONFIGS_DIR / "partners"
COLLAB = ("B", "messages", "influence_rate", "redundancy", "L")
# A partner's label with this suffix: its episodes were played with the seats exchanged.
SWAPPED = "@swapped"
# The focal seat's own numbers (benchmark.metrics.members.seat_metrics), self-play and cross.
SEAT = ("credit_share", "workload_share", "messages", "influence_rate")


def parse_population(population: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The members of a partner population (``name``, ``version``, ``members``: mixed-team
    members with a ``label`` each, unique, key-safe, and no ``agents``: a partner plays every
    agent but the focal one)."""
    name = population.get("name")
    members = population.get("members")
    if not isinstance(name, str) or not name:
        raise ValueError("a partner population needs a 'name'")
    if not isinstance(members, Sequence) or isinstance(members, str) or not members:
        raise ValueError(f"partner population {name!r}: 'members' must be a non-empty list")
    out, seen = [], set()
    for k, member in enumerate(members):
        where = f"partner population {name!r}: members[{k}]"
        if not isinstance(member, Mapping):
            raise ValueError(f"{where}: a member is a mapping, got {member!r}")
        label = member.get("label")
        if not isinstance(label, str) or not LABEL.match(label):
            raise ValueError(f"{where}: 'label' must be letters, digits, '_', '.' or '-'")
        if label in seen:
            raise ValueError(f"{where}: label {label!r} is taken")
        if member.get("agents") is not None:
            raise ValueError(f"{where}: a partner plays every agent but agent_0; no 'agents'")
        seen.add(label)
        out.append({k2: v for k2, v in member.items() if k2 != "agents"})
    return out


def load_population(name: str, root: Path = POPULATIONS_DIR) -> dict[str, Any]:
    """The partner population ``configs/partners/<name>.yaml``: its ``name``, ``version`` and
    :func:`parse_population`'s ``members``; ValueError naming the known populations."""
    path = root / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in root.glob("*.yaml"))
        raise ValueError(f"unknown partner population {name!r}; known populations are {known}")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, Mapping):
        raise ValueError(f"{path}: expected a mapping with name, version and members")
    members = parse_population(data)
    return {"name": data["name"], "version": str(data.get("version", "")), "members": members}


def crossplay_members(
    focal: str,
    focal_kwargs: Mapping[str, Any],
    partner: Mapping[str, Any],
    n_agents: int = 2,
    swapped: bool = False,
) -> list[dict[str, Any]]:
    """The mixed team of a cross-play episode: the focal team on agent_0, the partner on the
    rest; ``swapped``: the focal team on the last agent (agent_<n-1>) instead."""
    seat = n_agents - 1 if swapped else 0
    return [
        {"agents": [seat], "baseline": focal, "kwargs": dict(focal_kwargs), "label": focal},
        dict(partner),
    ]


def focal_seat(row: Mapping[str, Any]) -> str:
    """The agent the focal team played in a cross-play or self-play row."""
    swapped = str(row.get("partner") or "").endswith(SWAPPED)
    return f"agent_{row['n_agents'] - 1}" if swapped else "agent_0"


def _pair_key(row: Mapping[str, Any]) -> tuple:
    return (row["task"], row["split"], row["seed"], row["n_agents"], row["comm"])


def _mean(values: list[Any]) -> float | None:
    got = [float(v) for v in values if v is not None]
    return sum(got) / len(got) if got else None


def _sr_pairs(pairs: Sequence[tuple[Mapping, Mapping]]) -> dict[str, Any]:
    """SR of both sides of paired episodes, their difference and McNemar's exact p."""
    m = len(pairs)
    s_a = sum(bool(a["SR"]) for a, _ in pairs)
    s_b = sum(bool(b["SR"]) for _, b in pairs)
    only_a = sum(bool(a["SR"]) and not bool(b["SR"]) for a, b in pairs)
    only_b = sum(bool(b["SR"]) and not bool(a["SR"]) for a, b in pairs)
    return {
        "a": s_a / m if m else None,
        "a_ci": clopper_pearson(s_a, m),
        "b": s_b / m if m else None,
        "b_ci": clopper_pearson(s_b, m),
        "diff": (s_a - s_b) / m if m else None,
        "only_a": only_a,
        "only_b": only_b,
        "p": mcnemar_exact(only_a, only_b),
    }


def _seat_means(
    rows: Sequence[Mapping[str, Any]], load_trace: Callable[[Mapping], dict[str, Any]]
) -> dict[str, float | None]:
    seats = [seat_metrics(load_trace(r), focal_seat(r)) for r in rows]
    return {name: _mean([s[name] for s in seats]) for name in SEAT}


def crossplay_table(
    rows: Sequence[Mapping[str, Any]],
    load_trace: Callable[[Mapping], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One record per (partner, comm, n_agents): the paired episodes and the gap (see the
    module docstring). Episodes without an ok self-play twin are left out and counted. With
    ``load_trace``, also the focal seat's own numbers in both (``focal_<name>_self``,
    ``focal_<name>_cross``: its share of the credit and workload, messages it sent, influence
    of its messages). A partner also played with the seats exchanged (``<label>@swapped``)
    gets the policy-swap drop: SR as seated minus SR swapped, paired, with McNemar's p."""
    ok = [r for r in rows if r.get("status") == "ok" and not r.get("reference")]
    selfplay = {_pair_key(r): r for r in ok if not r.get("partner")}
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in ok:
        if r.get("partner"):
            groups.setdefault((r["partner"], r["comm"], r["n_agents"]), []).append(r)
    out = []
    for (partner, comm, n), cross in sorted(groups.items(), key=lambda kv: str(kv[0])):
        pairs = [(selfplay[_pair_key(r)], r) for r in cross if _pair_key(r) in selfplay]
        sr = _sr_pairs(pairs)
        tr_diff = [float(a["TR"]) - float(b["TR"]) for a, b in pairs]
        rec: dict[str, Any] = {
            "partner": partner,
            "comm": comm,
            "n_agents": n,
            "episodes": len(pairs),
            "unpaired": len(cross) - len(pairs),
            "SR_self": sr["a"],
            "SR_self_ci": sr["a_ci"],
            "SR_cross": sr["b"],
            "SR_cross_ci": sr["b_ci"],
            "SR_gap": sr["diff"],
            "only_self": sr["only_a"],
            "only_cross": sr["only_b"],
            "mcnemar_p": sr["p"],
            "TR_self": _mean([a["TR"] for a, _ in pairs]),
            "TR_cross": _mean([b["TR"] for _, b in pairs]),
            "TR_gap": _mean(tr_diff),
            "TR_gap_ci": t_interval(tr_diff) if tr_diff else (None, None),
        }
        for name in COLLAB:
            rec[f"{name}_self"] = _mean([a.get(name) for a, _ in pairs])
            rec[f"{name}_cross"] = _mean([b.get(name) for _, b in pairs])
        if load_trace is not None and pairs:
            for side, picked in (("self", [a for a, _ in pairs]), ("cross", [b for _, b in pairs])):
                for name, value in _seat_means(picked, load_trace).items():
                    rec[f"focal_{name}_{side}"] = value
        out.append(rec)
    _add_swap_drops(out, groups)
    return out


def _add_swap_drops(records: list[dict[str, Any]], groups: Mapping[tuple, list]) -> None:
    """The policy-swap drop on each seated partner's record that has a swapped twin."""
    for rec in records:
        if rec["partner"].endswith(SWAPPED):
            continue
        swapped = groups.get((rec["partner"] + SWAPPED, rec["comm"], rec["n_agents"]))
        if not swapped:
            continue
        seated = {_pair_key(r): r for r in groups[(rec["partner"], rec["comm"], rec["n_agents"])]}
        pairs = [(seated[_pair_key(r)], r) for r in swapped if _pair_key(r) in seated]
        sr = _sr_pairs(pairs)
        rec.update(
            swap_episodes=len(pairs),
            SR_swapped=sr["b"],
            swap_drop=sr["diff"],
            swap_only_seated=sr["only_a"],
            swap_only_swapped=sr["only_b"],
            swap_p=sr["p"],
        )


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return "[" + ", ".join(_fmt(v, digits) for v in value) + "]"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _pairing(r: Mapping[str, Any]) -> list[str]:
    """A record's partner, comm setting and team size, as cells."""
    return [str(r["partner"]), "on" if r["comm"] else "off", str(r["n_agents"])]


def crossplay_markdown(table: Sequence[Mapping[str, Any]]) -> str:
    """The cross-play records as markdown: the gap, then the focal seat's own numbers and the
    policy-swap drop when the records have them."""
    head = (
        "partner",
        "comm",
        "n",
        "episodes",
        "SR self [95%]",
        "SR cross [95%]",
        "SR gap",
        "self only / cross only",
        "McNemar p",
        "TR self",
        "TR cross",
        "TR gap [95%]",
        "B self / cross",
        "messages self / cross",
        "influence self / cross",
    )
    rows = [
        [
            *_pairing(r),
            str(r["episodes"]),
            f"{_fmt(r['SR_self'])} {_fmt(r['SR_self_ci'])}",
            f"{_fmt(r['SR_cross'])} {_fmt(r['SR_cross_ci'])}",
            _fmt(r["SR_gap"]),
            f"{r['only_self']} / {r['only_cross']}",
            _fmt(r["mcnemar_p"], 3),
            _fmt(r["TR_self"]),
            _fmt(r["TR_cross"]),
            f"{_fmt(r['TR_gap'])} {_fmt(r['TR_gap_ci'])}",
            f"{_fmt(r['B_self'])} / {_fmt(r['B_cross'])}",
            f"{_fmt(r['messages_self'], 1)} / {_fmt(r['messages_cross'], 1)}",
            f"{_fmt(r['influence_rate_self'])} / {_fmt(r['influence_rate_cross'])}",
        ]
        for r in table
    ]
    lines = markdown_table(head, rows)
    seat = [r for r in table if "focal_credit_share_self" in r]
    if seat:
        lines += [
            "",
            "The focal seat (self / cross): its share of the credit and of the workload, the "
            "messages it sent, and the influence of its messages on its partners.",
            "",
            *markdown_table(
                ("partner", "comm", "n", "credit share", "workload share", "messages", "influence"),
                [
                    [
                        *_pairing(r),
                        *(
                            f"{_fmt(r[f'focal_{name}_self'])} / {_fmt(r[f'focal_{name}_cross'])}"
                            for name in SEAT
                        ),
                    ]
                    for r in seat
                ],
            ),
        ]
    swaps = [r for r in table if "swap_drop" in r]
    if swaps:
        lines += [
            "",
            "Policy-swap drop: the same pairs with the seats exchanged (the focal team on the "
            "last agent), SR as seated minus SR swapped, paired.",
            "",
            *markdown_table(
                (
                    "partner",
                    "comm",
                    "n",
                    "episodes",
                    "SR seated",
                    "SR swapped",
                    "drop",
                    "seated only / swapped only",
                    "McNemar p",
                ),
                [
                    [
                        *_pairing(r),
                        str(r["swap_episodes"]),
                        _fmt(r["SR_cross"]),
                        _fmt(r["SR_swapped"]),
                        _fmt(r["swap_drop"]),
                        f"{r['swap_only_seated']} / {r['swap_only_swapped']}",
                        _fmt(r["swap_p"], 3),
                    ]
                    for r in swaps
                ],
            ),
        ]
    return "\n".join(lines) + "\n"


def write_crossplay(
    root: Path,
    rows: Sequence[Mapping[str, Any]],
    load_trace: Callable[[Mapping], dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """``crossplay.md`` in run directory ``root`` when the run has cross-play rows; the
    records."""
    table = crossplay_table(rows, load_trace)
    if table:
        title = "# Cross-play: the focal team with held-out partners against self-play\n\n"
        note = (
            "Paired on task, split, seed, team size and comm. SR: Clopper-Pearson 95%; gap = "
            "self-play minus cross-play; McNemar exact p on the discordant pairs; TR gap: paired "
            "t interval.\n\n"
        )
        (root / "crossplay.md").write_text(title + note + crossplay_markdown(table))
    return table
