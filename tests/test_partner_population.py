"""The held-out partner population (configs/partners/heldout.yaml): a versioned list of mixed-team
members, each of which parses and plays an episode on the real simulator beside the heuristic
as agent_0, under its own label."""

from __future__ import annotations

import pytest
import yaml

from benchmark.agents.mixed import MixedTeam, parse_members
from benchmark.env import make_env
from benchmark.paths import CONFIGS_DIR
from benchmark.rollout import run_episode

POPULATION = yaml.safe_load((CONFIGS_DIR / "partners" / "heldout.yaml").read_text())
PARTNERS = POPULATION["members"]
FOCAL = {"agents": [0], "baseline": "heuristic"}


def test_the_population_is_named_versioned_and_labelled() -> None:
    assert POPULATION["name"] == "heldout" and POPULATION["version"] == "v1"
    labels = [p["label"] for p in PARTNERS]
    assert len(labels) == len(set(labels)), labels
    assert {"heuristic", "random", "policy-tiny"} <= set(labels)
    assert all("agents" not in p for p in PARTNERS), "a partner plays whoever the focal does not"
    for partner in PARTNERS:
        spec = parse_members([FOCAL, partner])
        assert spec[-1].label == partner["label"] and spec[-1].agents is None


@pytest.mark.parametrize("partner", PARTNERS, ids=[p["label"] for p in PARTNERS])
def test_each_partner_plays_beside_the_heuristic(partner: dict) -> None:
    env = make_env("transport_apple_fridge_v0", n_agents=2, seed=0)
    trace = run_episode(env, MixedTeam([FOCAL, partner]), seed=0)
    assert trace["members"] == {"agent_0": "heuristic", "agent_1": partner["label"]}
    acted = {a for step in trace["decisions"] for a in step["actions"]}
    assert acted == {"agent_0", "agent_1"}
