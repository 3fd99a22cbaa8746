"""Models compared on the same episodes: pairing by episode, exact McNemar, per family."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.compare import compare, main
from benchmark.metrics.stats import mcnemar_exact


def test_the_exact_mcnemar_p_value_is_the_two_sided_binomial_of_the_discordant_pairs() -> None:
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 2**5)
    assert mcnemar_exact(1, 9) == pytest.approx(2 * 11 / 2**10)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(3, 3) == 1.0
    with pytest.raises(ValueError, match="discordant counts must be >= 0"):
        mcnemar_exact(-1, 2)


def _run(baseline: str, out: Path, comm: str = "[true]") -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmark.run",
            f"baseline={baseline}",
            "suite=smoke",
            f"comm={comm}",
            "workers=0",
            "logger.console=false",
            f"output_dir={out}",
        ],
        check=True,
        capture_output=True,
    )
    return out


def test_runs_are_compared_on_the_episodes_they_share(tmp_path: Path, capsys) -> None:
    heuristic = _run("heuristic", tmp_path / "heuristic")
    rand = _run("random", tmp_path / "random")
    result = compare([rand, heuristic])
    rows = [json.loads(line) for line in (heuristic / "episodes.jsonl").open()]
    played = [r for r in rows if not r["reference"]]
    solved = sum(r["SR"] >= 1 for r in played)
    assert result["paired_episodes"] == len(played) > 0
    first, second = result["groups"]["all"]
    assert first["SR"] == 0 and second["SR"] == pytest.approx(solved / len(played))
    assert (second["only_first"], second["only_this"]) == (0, solved)
    assert second["mcnemar_p"] == pytest.approx(mcnemar_exact(0, solved))
    families = {r["family"] for r in played}
    assert set(result["groups"]) == {"all", *families}
    assert sum(result["groups"][f][1]["episodes"] for f in families) == len(played)
    # A run with messages on and off: its comm-on episodes pair with the heuristic's; paired
    # across messages settings, each episode would pair twice: refused, with the reason.
    both = _run("random", tmp_path / "both", comm="[true,false]")
    assert compare([both, heuristic])["paired_episodes"] == len(played)
    with pytest.raises(ValueError, match="two episodes pair as"):
        compare([both, heuristic], across_comm=True)
    assert main([str(rand), str(heuristic), "--json", str(tmp_path / "c.json")]) == 0
    assert "McNemar p" in capsys.readouterr().out
    assert json.loads((tmp_path / "c.json").read_text())["paired_episodes"] == len(played)
    with pytest.raises(SystemExit):
        main([str(rand), str(tmp_path / "nothing")])


def test_a_bundle_compares_as_the_run_directory_it_was_packed_from(tmp_path: Path) -> None:
    from leaderboard.client.pack import pack_run

    heuristic = _run("heuristic", tmp_path / "heuristic")
    rand = _run("random", tmp_path / "random")
    bundle = pack_run(heuristic, tmp_path / "heuristic.smoke.tar.gz", {"method": "heuristic"})
    from_dir = compare([rand, heuristic])
    from_bundle = compare([rand, bundle])
    assert from_bundle["paired_episodes"] == from_dir["paired_episodes"] > 0
    for group, entries in from_dir["groups"].items():
        for a, b in zip(entries, from_bundle["groups"][group], strict=True):
            assert {k: v for k, v in a.items() if k != "run"} == {
                k: v for k, v in b.items() if k != "run"
            }
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a gzip file")
    with pytest.raises(ValueError, match=r"cannot read bundle .*broken\.tar\.gz"):
        compare([rand, broken])
