"""The ``crossplay`` table: focal teams with a held-out partner population, against self-play.

A ``crossplay`` table names a partner population (``population``, a ``configs/partners/`` file)
and gives each run a ``focal`` member (a mixed-team member: ``baseline``, ``kwargs``, ``llm``,
``llm_options``). :func:`expand_runs` turns each such run into the runs that are played and
committed: its self-play (the focal member on every agent) under the run's own id, and one run
per partner of the population (or of the run's ``partners``) with id ``<id>--<partner label>``:
the focal member on agent_0, the partner on the rest. All are ``baseline=mixed`` runs of the
same episodes, so their bundles are ordinary mixed-team submissions. A partner run is
deterministic when its focal run is and its partner is not among the table's ``sampled``.

:func:`crossplay_records` pairs every partner run's episodes with its focal run's self-play
episodes (:func:`benchmark.results.crossplay.crossplay_table`) and gives one record per (focal,
partner). Columns: ``<metric>@self`` and ``<metric>@cross`` (SR with its exact interval; TR and
the collaboration metrics means), ``SR@gap`` and ``TR@gap`` (self-play minus cross-play; TR with
its paired t interval), ``mcnemar_p`` (exact, on the discordant pairs), and the focal seat's own
numbers ``focal_<credit_share|workload_share|messages|influence_rate>@self|@cross``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from benchmark.results.crossplay import COLLAB, SEAT, crossplay_table, load_population

if TYPE_CHECKING:
    from benchmark.reproduce.sources import Row, RunData

Record = dict[str, Any]
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


def _cell(rec: Mapping[str, Any], column: str) -> dict[str, Any]:
    name, _, side = column.partition("@")
    key = f"{name}_{side}" if side else name
    lo, hi = rec.get(f"{key}_ci") or (None, None)
    return {"mean": rec.get(key), "lo": lo, "hi": hi, "n": rec["episodes"]}


def _load_from(loaders: Mapping[str | None, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    return loaders[row.get("partner")](row)


def crossplay_records(columns: Sequence[str], runs: Sequence[RunData]) -> list[Record]:
    """One record per (focal run, partner): ``baseline`` (the focal run's label), ``partner``,
    ``episodes`` (paired), ``errors`` (the partner run's failed episodes) and the columns."""
    out: list[Record] = []
    for focal in (r for r in runs if not r.spec.focal):
        group = [focal, *(r for r in runs if r.spec.focal == focal.spec.id)]
        rows: list[Row] = []
        loaders = {}
        for run in group:
            partner = run.spec.partner or None
            loaders[partner] = run.load_trace
            rows += [{**r, "partner": partner} for r in run.rows]

        load_trace = functools.partial(_load_from, loaders)

        errors = {run.spec.partner: sum(r.get("status") != "ok" for r in run.rows) for run in group}
        labels = {run.spec.partner: run.spec.label for run in group}
        for rec in crossplay_table(rows, load_trace):
            out.append(
                {
                    "baseline": focal.spec.label,
                    "partner": rec["partner"],
                    "run_label": labels[rec["partner"]],
                    "episodes": rec["episodes"],
                    "errors": errors[rec["partner"]],
                    **{column: _cell(rec, column) for column in columns},
                }
            )
    return out
