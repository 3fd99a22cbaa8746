"""The ``crossplay`` table: focal teams with a held-out partner population, against self-play.

A ``crossplay`` table names a partner population (``population``, a ``configs/partners/`` file)
and gives each run a ``focal`` member (a mixed-team member: ``baseline``, ``kwargs``, ``llm``,
``llm_options``). :func:`expand_runs` turns each such run into the runs that are played and
committed: its self-play (the focal member on every agent) under the run's own id, and one run
per partner of the population (or of the run's ``partners``) with id ``<id>--<partner label>``:
the focal member on agent_0, the partner on the rest. All are ``baseline=mixed`` runs of the
same episodes, so their bundles are ordinary mixed-team submissions. A partner run is
deterministic when its focal run is and its partner is not among the table's ``sampled``.

:func:`benchmark.reproduce.build.crossplay_records` pairs every partner run's episodes with its
focal run's self-play episodes (:func:`benchmark.results.crossplay.crossplay_table`) and gives
one record per (focal, partner). Columns: ``<metric>@self`` and ``<metric>@cross`` (SR with its
exact interval; TR and the collaboration metrics means), ``SR@gap`` and ``TR@gap`` (self-play
minus cross-play; TR with its paired t interval), ``mcnemar_p`` (exact, on the discordant
pairs), and the focal seat's own numbers
``focal_<credit_share|workload_share|messages|influence_rate>@self|@cross``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from benchmark.results.crossplay import COLLAB, SEAT, load_population

RUN_FIELDS = {"id", "label", "overrides", "deterministic", "short", "focal", "partners"}
_BARE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
COLUMNS = (
    *(f"{m}@{side}" for m in ("SR", "TR", *COLLAB) for side in ("self", "cross")),
    "SR@gap",
    "TR@gap",
    "mcnemar_p",
    *(f"focal_{m}@{side}" for m in SEAT for side in ("self", "cross")),
)


def hydra_value(value: Any) -> str:
    """``value`` (mappings, lists, strings, numbers, booleans, None) in Hydra's override syntax;
    every string quoted, so that none is read as another type."""
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str) or not _BARE.match(key):
                raise ValueError(f"key {key!r} cannot be written in an override")
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        if "'" in value or "\\" in value:
            raise ValueError(f"string {value!r} cannot be quoted in an override")
        return f"'{value}'"
    raise ValueError(f"{value!r} cannot be written in an override")


def _members_override(members: list[dict[str, Any]]) -> str:
    return f"baseline.kwargs.members={hydra_value(members)}"


def expand_runs(
    runs: Sequence[Any], population: str, sampled: Sequence[str], where: str
) -> list[dict[str, Any]]:
    """The played runs of a crossplay table's ``runs`` (see the module docstring), as run
    mappings; ValueError naming the run and field otherwise."""
    partners = load_population(population)["members"]
    labels = [p["label"] for p in partners]
    unknown = sorted(set(sampled) - set(labels))
    if unknown:
        raise ValueError(f"{where}.sampled: {unknown} are not partners of {population}: {labels}")
    out = []
    for i, run in enumerate(runs):
        at = f"{where}.runs[{i}]"
        if not isinstance(run, dict):
            raise ValueError(f"{at}: expected a mapping, got {run!r}")
        extra = sorted(set(run) - RUN_FIELDS)
        if extra:
            raise ValueError(f"{at}: unknown field(s) {extra}; known: {sorted(RUN_FIELDS)}")
        focal = run.get("focal")
        if not isinstance(focal, dict) or "agents" in focal or "label" in focal:
            raise ValueError(f"{at}.focal: a member mapping without 'agents' or 'label'")
        chosen = run.get("partners", labels)
        missing = sorted(set(chosen) - set(labels))
        if missing:
            raise ValueError(f"{at}.partners: {missing} are not partners of {population}")
        overrides = list(run.get("overrides") or [])
        if any(
            o.split("=", 1)[0].lstrip("+") in ("baseline", "baseline.kwargs.members")
            for o in overrides
        ):
            raise ValueError(f"{at}.overrides: the team comes from 'focal', not 'baseline'")
        label = run.get("label")
        me = {**focal, "label": label}
        common = {k: run[k] for k in ("deterministic", "short") if k in run}
        members = [me]
        out.append(
            {
                "id": run.get("id"),
                "label": label,
                **common,
                "overrides": ["baseline=mixed", _members_override(members), *overrides],
            }
        )
        for partner in (p for p in partners if p["label"] in chosen):
            members = [{**me, "agents": [0]}, partner]
            out.append(
                {
                    "id": f"{run.get('id')}--{partner['label']}",
                    "label": f"{label} + {partner['label']}",
                    **common,
                    "deterministic": bool(run.get("deterministic"))
                    and partner["label"] not in sampled,
                    "overrides": ["baseline=mixed", _members_override(members), *overrides],
                    "focal": run.get("id"),
                    "partner": partner["label"],
                }
            )
    return out
