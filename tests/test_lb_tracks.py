"""Leaderboard tracks: keys, the benchmark's suite files, and the episodes a track expects."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchmark.paths import CONFIGS_DIR
from benchmark.results.challenge import load_challenge
from benchmark.results.suite import EpisodeRef, load_suite, suites
from leaderboard.core.tracks import Track, expected_episodes
from tests.helpers.lb_bundles import CHALLENGE_EPISODES, write_challenge

SMOKE = Track("smoke", "v1", 2, True, "full", "skill")


def test_a_track_key_is_url_safe_and_round_trips() -> None:
    assert SMOKE.key == "smoke-v1.n2.comm-on.full.skill"
    other = Track("my-suite", "v2", 3, False, "partial", "primitive")
    assert other.key == "my-suite-v2.n3.comm-off.partial.primitive"
    for track in (SMOKE, other):
        assert Track.from_key(track.key) == track
        assert "/" not in track.key and "?" not in track.key


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("smoke-v1.n2.comm-maybe.full.skill", "expected <suite>-<version>"),
        ("smoke.n2.comm-on.full.skill", "expected <suite>-<version>"),
        ("smoke-v1.n0.comm-on.full.skill", "n_agents=0"),
        ("smoke-v1.n2.comm-on.hidden.skill", r"observability='hidden' is not one of \['partial'"),
        ("smoke-v1.n2.comm-on.full.macro", r"action_level='macro' is not one of \['skill'"),
    ],
)
def test_a_malformed_track_key_is_refused_naming_the_part(key: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Track.from_key(key)


def test_a_track_refuses_fields_of_the_wrong_type() -> None:
    with pytest.raises(ValueError, match=r"Track\.comm=1"):
        Track("smoke", "v1", 2, 1, "full", "skill")
    with pytest.raises(ValueError, match=r"Track\.suite_version='v-1'"):
        Track("smoke", "v-1", 2, True, "full", "skill")


def test_the_suites_are_the_benchmarks_suite_files() -> None:
    known = suites()
    assert set(known) == {
        "crossplay",
        "crossplay_llm",
        "default",
        "full",
        "human",
        "llm_val",
        "llm_heldout",
        "mapthor",
        "mapthor_first_plan",
        "mapthor_llamar",
        "paper",
        "paper_seed0",
        "rl_heldout",
        "scaling",
        "search",
        "smoke",
        "test",
    }
    smoke = load_suite("smoke")
    raw = yaml.safe_load((CONFIGS_DIR / "suite" / "smoke.yaml").read_text())
    assert [e.task for e in smoke.entries] == [e["task"] for e in raw["entries"]]
    assert not smoke.hidden and known["test"].hidden
    assert (known["test"].focal, known["crossplay"].focal, known["human"].focal) == (
        None,
        "team",
        "human",
    )
    with pytest.raises(ValueError, match=r"unknown suite 'nope'; known suites are \['crossplay'"):
        load_suite("nope")


def test_a_suite_mixing_hidden_and_published_seeds_is_refused(tmp_path: Path) -> None:
    (tmp_path / "mixed.yaml").write_text(
        "name: mixed\nversion: v1\nentries:\n"
        "  - {task: prepare_toast_v0, split: test, n_agents: [2], seeds: [0]}\n"
        "  - {task: heavy_box_sofa_v0, split: test, n_agents: [2], seeds: []}\n"
    )
    with pytest.raises(ValueError, match="some entries list seeds and some do not"):
        load_suite("mixed", tmp_path)


def test_a_track_expects_every_seed_and_one_reference_per_cell() -> None:
    refs = expected_episodes(Track("full", "v1", 3, False, "partial", "skill"))
    runs = [r for r in refs if not r.reference]
    assert len(runs) == 24 * 10 and len(refs) == 2 * len(runs)
    assert all(r.n_agents == 3 and not r.comm and r.scene is None for r in runs)
    assert refs[1] == EpisodeRef("heavy_box_sofa_v0", "test", 0, 1, False, None, True)
    assert expected_episodes(Track("smoke", "v1", 3, True, "full", "skill")) == []


def test_a_version_the_suite_is_not_at_is_refused() -> None:
    with pytest.raises(ValueError, match="suite smoke is at version v1, the track is for v0"):
        expected_episodes(Track("smoke", "v0", 2, True, "full", "skill"))


def test_a_hidden_seed_suite_takes_its_episodes_from_the_challenge(tmp_path: Path) -> None:
    track = Track("test", "v1", 2, True, "partial", "skill")
    challenge = load_challenge(write_challenge(tmp_path / "c.json", "ch-1"))
    refs = expected_episodes(track, challenge)
    assert [(r.task, r.scene, r.seed, r.n_agents) for r in refs if not r.reference] == [
        (e["task"], e["scene"], e["seed"], 2) for e in CHALLENGE_EPISODES
    ]
    assert {r.scene for r in refs if r.reference} == {e["scene"] for e in CHALLENGE_EPISODES}
    with pytest.raises(ValueError, match="hides its seeds"):
        expected_episodes(track)
    with pytest.raises(ValueError, match="publishes its seeds"):
        expected_episodes(SMOKE, challenge)
    stray = [{**CHALLENGE_EPISODES[0], "task": "prepare_coffee_v0"}]
    foreign = load_challenge(write_challenge(tmp_path / "f.json", "ch-2", stray))
    with pytest.raises(ValueError, match="is not a cell of suite test"):
        expected_episodes(track, foreign)


def test_an_episode_key_is_the_runners_row_key() -> None:
    ref = EpisodeRef("prepare_toast_v0", "test", 7, 2, False, "FloorPlan5")
    assert ref.key("oracle") == "oracle/prepare_toast_v0/test/FloorPlan5/n2/s7/comm0/run"
    reference = EpisodeRef("prepare_toast_v0", "test", 7, 1, True, None, True)
    assert reference.key("random") == "random/prepare_toast_v0/test/n1/s7/comm1/ref"
