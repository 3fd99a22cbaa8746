"""Challenges: a hidden-seed suite runs exactly the episodes a challenge file names, and every
trace records the challenge it answers."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from rich.console import Console

from benchmark.env import replay
from benchmark.paths import CONFIGS_DIR
from benchmark.results.challenge import Challenge, ChallengeError, load_challenge
from benchmark.results.suite import parse_suite
from benchmark.runner.app import build_jobs, run
from benchmark.runner.config import register_configs

register_configs()
EPISODES = [
    {"task": "transport_produce_fridge_v0", "scene": "FloorPlan27", "seed": 812, "n_agents": 2},
    {"task": "switch_off_bathroom_v0", "scene": "FloorPlan428", "seed": 77, "n_agents": 2},
]


PARTNER = {"label": "heuristic-silent", "baseline": "heuristic", "kwargs": {"silent": True}}


def _challenge(tmp_path: Path, **changes) -> Path:
    data = {
        "format": 1,
        "id": "ch-0001",
        "suite": "test",
        "suite_version": "v1",
        "team": "team-a",
        "expires": "2030-01-01T00:00:00+00:00",
        "episodes": EPISODES,
        **changes,
    }
    path = tmp_path / "challenge.json"
    path.write_text(json.dumps(data))
    return path


def _cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        return compose(
            "run",
            overrides=[f"output_dir={tmp_path / 'run'}", "logger.console=false", *overrides],
        )


def test_a_challenge_runs_exactly_its_episodes_and_every_trace_names_it(tmp_path: Path) -> None:
    path = _challenge(tmp_path)
    cfg = _cfg(tmp_path, "suite=test", f"challenge={path}", "workers=0", "reference=false")
    result = run(cfg, Console(file=io.StringIO()))
    rows = result["rows"]
    assert sorted((r["task"], r["scene"], r["seed"]) for r in rows) == sorted(
        (e["task"], e["scene"], e["seed"]) for e in EPISODES
    )
    for row in rows:
        assert row["status"] == "ok"
        trace = json.loads((result["root"] / row["trace_path"]).read_text())
        assert trace["config"]["options"]["challenge"] == "ch-0001"
        assert trace["config"]["scene"] == row["scene"] and replay(trace).ok


def test_references_of_a_challenge_keep_its_scenes(tmp_path: Path) -> None:
    jobs = build_jobs(_cfg(tmp_path, "suite=test", f"challenge={_challenge(tmp_path)}"))
    assert {(j.task, j.scene, j.n_agents) for j in jobs if j.reference} == {
        (e["task"], e["scene"], 1) for e in EPISODES
    }
    assert all(j.env_options["challenge"] == "ch-0001" for j in jobs)


def test_a_hidden_seed_suite_needs_a_challenge_and_a_challenge_its_suite(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="hides its seeds: its episodes are those of a challenge"):
        build_jobs(_cfg(tmp_path, "suite=test"))
    other = _challenge(tmp_path, suite="default")
    with pytest.raises(ValueError, match="is for suite default v1"):
        build_jobs(_cfg(tmp_path, "suite=test", f"challenge={other}"))
    stray = _challenge(tmp_path, episodes=[{**EPISODES[0], "task": "prepare_coffee_v0"}])
    with pytest.raises(ValueError, match="is not a cell of suite test"):
        build_jobs(_cfg(tmp_path, "suite=test", f"challenge={stray}"))
    with pytest.raises(ValueError, match="do not set seeds"):
        build_jobs(_cfg(tmp_path, "suite=test", f"challenge={_challenge(tmp_path)}", "seeds=3"))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": 3}, "field 'format'"),
        ({"format": True}, "field 'format'"),
        ({"expires": "tomorrow"}, "field 'expires'"),
        ({"expires": "2030-01-01T00:00:00"}, "no time zone"),
        ({"episodes": []}, "at least one episode"),
        ({"episodes": [{**EPISODES[0], "seed": "7"}]}, r"episodes\[0\]"),
        ({"episodes": [EPISODES[0], EPISODES[0]]}, "listed twice"),
        ({"id": ""}, "field 'id'"),
        ({"episodes": [{**EPISODES[0], "partner": PARTNER}]}, r"'episodes\[0\].partner': format 1"),
        (
            {"format": 2, "episodes": [{**EPISODES[0], "partner": {**PARTNER, "label": "a b"}}]},
            r"'episodes\[0\].partner': field 'label'",
        ),
        (
            {"format": 2, "episodes": [{**EPISODES[0], "partner": {**PARTNER, "llm": "smollm2"}}]},
            r"'episodes\[0\].partner': unknown field\(s\) \['llm'\]",
        ),
        (
            {"format": 2, "episodes": [{**EPISODES[0], "n_agents": 1, "partner": PARTNER}]},
            "a one-agent episode has no partner",
        ),
    ],
)
def test_malformed_challenge_files_are_refused_naming_the_field(
    tmp_path: Path, changes: dict, message: str
) -> None:
    with pytest.raises(ChallengeError, match=message):
        load_challenge(_challenge(tmp_path, **changes))


def test_a_challenge_round_trips_through_json(tmp_path: Path) -> None:
    challenge = load_challenge(_challenge(tmp_path))
    assert Challenge.from_json(challenge.to_json()) == challenge


def test_a_format_1_challenge_still_loads_and_is_written_back_as_format_1(tmp_path: Path) -> None:
    path = _challenge(tmp_path)
    challenge = load_challenge(path)
    assert all(e.partner is None for e in challenge.episodes)
    assert challenge.to_json() == json.loads(path.read_text())


def test_partners_need_format_2_and_round_trip_through_it(tmp_path: Path) -> None:
    path = _challenge(tmp_path, format=2, episodes=[{**e, "partner": PARTNER} for e in EPISODES])
    challenge = load_challenge(path)
    assert challenge.to_json()["format"] == 2
    assert Challenge.from_json(challenge.to_json()) == challenge
    partner = challenge.partner_of("switch_off_bathroom_v0", "FloorPlan428", 77, 2)
    assert partner is not None and partner.member() == PARTNER
    assert challenge.partner_of("switch_off_bathroom_v0", "FloorPlan428", 78, 2) is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"focal": "robot"}, r"field 'focal': expected one of \['team', 'human'\]"),
        ({"focal": "team", "seeds": [1]}, "field 'focal': a suite with a focal seat hides"),
        ({"focal": "team", "n_agents": [1, 2]}, r"field 'entries\[0\].n_agents': a suite with"),
    ],
)
def test_a_focal_seat_is_one_of_two_on_a_hidden_seed_suite_of_teams(
    changes: dict, message: str
) -> None:
    entry = {"task": EPISODES[0]["task"], "split": "test", "n_agents": [2], "seeds": []}
    for name in ("seeds", "n_agents"):
        if name in changes:
            entry[name] = changes.pop(name)
    with pytest.raises(ValueError, match=message):
        parse_suite({"name": "x", "version": "v1", "entries": [entry], **changes}, "suite x")


def test_a_challenge_must_assign_partners_exactly_where_its_suite_has_a_focal_seat(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="assigns a partner, and suite test has no focal seat"):
        build_jobs(_cfg(tmp_path, "suite=test", "challenge=" + str(_challenge(
            tmp_path, format=2, episodes=[{**EPISODES[0], "partner": PARTNER}]
        ))))  # fmt: skip
    lacking = _challenge(tmp_path, suite="crossplay", episodes=[
        {"task": "switch_off_bathroom_v0", "scene": "FloorPlan428", "seed": 77, "n_agents": 2}
    ])  # fmt: skip
    with pytest.raises(ValueError, match="has no partner, and suite crossplay assigns one"):
        build_jobs(_cfg(tmp_path, "suite=crossplay", f"challenge={lacking}"))


def test_a_focal_seat_challenge_runs_each_episode_as_the_team_beside_its_partner(
    tmp_path: Path,
) -> None:
    episode = {"task": "switch_off_bathroom_v0", "scene": "FloorPlan428", "seed": 77}
    path = _challenge(
        tmp_path, format=2, suite="crossplay",
        episodes=[{**episode, "n_agents": 2, "partner": PARTNER}],
    )  # fmt: skip
    jobs = build_jobs(_cfg(tmp_path, "suite=crossplay", f"challenge={path}", "baseline=heuristic"))
    run, reference = jobs
    assert (run.baseline, run.team, run.partner, reference.team) == (
        "heuristic", "mixed", "heuristic-silent", "",
    )  # fmt: skip
    assert run.team_kwargs["members"] == [
        {"agents": [0], "baseline": "heuristic", "kwargs": {}, "label": "heuristic"},
        PARTNER,
    ]
    with pytest.raises(ValueError, match="its challenge assigns the partners"):
        build_jobs(_cfg(tmp_path, "suite=crossplay", f"challenge={path}", "partners=smoke"))
