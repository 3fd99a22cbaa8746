"""The trace's checklist holds each atom as a record; replay and the viewer read the records."""

from __future__ import annotations

import copy
import html
import json
from pathlib import Path

import pytest

from benchmark.agents import make_team
from benchmark.env import make_env, replay
from benchmark.env.trace import TRACE_FORMAT, atom_record
from benchmark.media.viewer import write_episode_media
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode
from benchmark.tasks.goals import Atom


@pytest.fixture(scope="module")
def toast() -> tuple[dict, list[Atom]]:
    """The oracle toasting two bread slices: a checklist of type-level atoms on derived objects."""
    env = make_env("prepare_toast_v0", n_agents=2, seed=0, observability="full")
    trace = run_episode(env, make_team("oracle"), seed=0)
    return json.loads(json.dumps(trace)), list(env.episode.checklist)


def test_the_checklist_records_every_atom_field_under_the_new_format(toast) -> None:
    trace, checklist = toast
    assert trace["format"] == TRACE_FORMAT == 2
    assert trace["checklist"] == [atom_record(a) for a in checklist]
    for record in trace["checklist"]:
        fields = {k: v for k, v in record.items() if k != "key"}
        assert record["key"] == Atom(**fields).key
    assert [(r["subject"], r["at_least"]) for r in trace["checklist"]] == [
        ("BreadSliced", 1),
        ("BreadSliced", 2),
    ]


def test_type_level_atoms_are_covered_through_the_derived_slices(toast) -> None:
    trace, _ = toast
    picked = {s["target"] for s in trace["skills"] if s["skill"] == "pickup" and s["success"]}
    assert any("|BreadSliced_" in oid for oid in picked)
    m = episode_metrics(trace)
    assert m["SR"] == 1.0 and m["C"] == 1.0


def test_replay_compares_every_field_of_the_checklist(toast) -> None:
    trace, _ = toast
    assert replay(trace).ok
    for field, value in (("at_least", 3), ("subject", "Bread"), ("key", "isCooked(Bread)=true")):
        forged = copy.deepcopy(trace)
        forged["checklist"][0][field] = value
        result = replay(forged)
        assert not result.ok and not result.checklist_matches, field


def test_the_viewer_lists_the_atoms_by_key(toast, tmp_path: Path) -> None:
    trace, _ = toast
    page = write_episode_media(trace, tmp_path).read_text()
    for record in trace["checklist"]:
        assert f"<td>{html.escape(record['key'])}</td>" in page
