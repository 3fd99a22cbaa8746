"""The committed reference bundles still verify: every trace replays and every metric is the
one the simulator and the metrics give today."""

from __future__ import annotations

from pathlib import Path

import pytest

from leaderboard.core.bundle import read_bundle
from leaderboard.core.verify import verify_bundle

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "data" / "smoke"
BUNDLES = sorted(SEED.glob("*.tar.gz"))


def test_there_is_a_reference_bundle_per_reference_baseline() -> None:
    assert {p.name.split("-smoke")[0] for p in BUNDLES} == {
        "oracle",
        "heuristic",
        "random",
        "llm_planner",
    }


@pytest.mark.parametrize("path", BUNDLES, ids=lambda p: p.name)
def test_a_reference_bundle_verifies_by_replay(path: Path) -> None:
    with path.open("rb") as handle:
        bundle = read_bundle(handle)
    verdict = verify_bundle(bundle)
    assert verdict.ok, verdict.reasons + tuple(r for e in verdict.episodes for r in e.reasons)
    assert verdict.track.suite == "smoke" and verdict.track.n_agents == 2
    assert len(verdict.episodes) == 12, "6 episodes and their one-agent references"
