"""Replay verification: a bundle of real episodes verifies, and every forgery is rejected
naming the episode and the field.

The bundle is packed once from a real oracle run of the smoke suite; the forgeries edit its
rows and traces the way an attacker would (recomputing checksums and, where said, hashes)."""

from __future__ import annotations

import copy
import io
import json
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmark.metrics.episode import episode_metrics
from benchmark.results.challenge import load_challenge
from benchmark.results.run_dir import read_run
from benchmark.results.suite import EpisodeRef
from leaderboard.client.pack import pack_run
from leaderboard.core.bundle import read_bundle
from leaderboard.core.tracks import Track
from leaderboard.core.verify import (
    Verdict,
    expected_config,
    main,
    measure,
    verify_bundle,
    verify_episode,
)
from tests.helpers.lb_bundles import archive, edit, members, reseal, run_suite, write_challenge

TRANSPORT = "oracle/transport_produce_fridge_v0/test/n2/s0/comm1/run"
ONE_TASK = "suite.entries=[{task:%s,split:test,n_agents:[2],seeds:[0]}]"
SMOKE = Track("smoke", "v1", 2, True, "full", "skill")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("lbv")


@pytest.fixture(scope="module")
def packed(work: Path) -> bytes:
    """The oracle on the smoke suite: 6 run episodes and their 6 one-agent references."""
    run = run_suite(work / "oracle", "suite=smoke", "baseline=oracle")["root"]
    return pack_run(run, work / "oracle.tar.gz", {"method": "Oracle"}).read_bytes()


@pytest.fixture(scope="module")
def other_tracks(work: Path) -> dict[str, dict[str, Any]]:
    """Traces of the transport episode of ``packed``'s track run with comm off and with a
    16-token message cap (other tracks), by comm setting."""
    result = run_suite(
        work / "other",
        "suite=smoke",
        ONE_TASK % "transport_produce_fridge_v0",
        "comm=[true,false]",
        "+env.token_cap=16",
        "reference=false",
    )
    run = read_run(result["root"])
    return {("on" if r["comm"] else "off"): run.trace(r) for r in run.rows}


def _verify(data: bytes, challenge=None) -> Verdict:
    return verify_bundle(read_bundle(io.BytesIO(data)), challenge)


def _rejected(verdict: Verdict) -> list[str]:
    assert not verdict.ok
    return verdict.explanation


def _row(rows: list[dict], key: str) -> dict:
    return next(r for r in rows if r["key"] == key)


def test_a_packed_real_run_verifies_and_metrics_are_recomputed(packed: bytes) -> None:
    bundle = read_bundle(io.BytesIO(packed))
    verdict = verify_bundle(bundle)
    assert verdict.ok, verdict.explanation
    assert verdict.track == SMOKE and verdict.challenge is None and verdict.reasons == ()
    assert len(verdict.episodes) == 12
    rows = {r["key"]: r for r in bundle.rows}
    for check in verdict.episodes:
        assert check.ok and check.metrics == episode_metrics(bundle.traces[check.key])
        assert check.metrics["SR"] == rows[check.key]["SR"]
    assert verdict.trace_hashes == {r["trace_hash"] for r in bundle.rows if not r["reference"]}


def test_the_expected_config_is_built_by_the_server(packed: bytes) -> None:
    bundle = read_bundle(io.BytesIO(packed))
    ref = EpisodeRef("transport_produce_fridge_v0", "test", 0, 2, True)
    config = expected_config(ref, SMOKE, None)
    assert config == bundle.traces[TRANSPORT]["config"]
    assert config["options"]["token_cap"] == 32 and config["options"]["observability"] == "full"
    reference = expected_config(replace(ref, n_agents=1, reference=True), SMOKE, None)
    assert reference["options"]["strict_agents"] is False and reference["n_agents"] == 1


def test_a_metric_changed_in_a_row_is_rejected(packed: bytes) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        _row(rows, TRANSPORT)["L"] -= 3

    forged = edit(packed, change)
    truth = _row(read_bundle(io.BytesIO(packed)).rows, TRANSPORT)["L"]
    verdict = _verify(forged)
    assert _rejected(verdict) == [f"{TRANSPORT}: L: {truth - 3} != {truth}"]
    assert sum(not c.ok for c in verdict.episodes) == 1


def test_an_action_edited_in_a_trace_is_rejected(packed: bytes) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        decisions = traces[TRANSPORT]["decisions"]
        decisions[1]["actions"]["agent_0"] = "wait"

    reasons = _rejected(_verify(edit(packed, change)))
    assert len(reasons) == 1
    assert reasons[0].startswith(f"{TRANSPORT}: trace_hash: ")
    assert reasons[0].endswith("(the hash of the trace's body)")


def test_an_edited_trace_with_a_recomputed_hash_fails_its_replay(packed: bytes) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        trace = traces[TRANSPORT]
        trace["decisions"][1]["actions"]["agent_0"] = "wait"
        reseal(trace, _row(rows, TRANSPORT))

    reasons = _rejected(_verify(edit(packed, change)))
    assert len(reasons) == 1 and reasons[0].startswith(f"{TRANSPORT}: ")
    assert "replayed" in reasons[0]


def test_a_forged_success_with_a_recomputed_hash_fails_its_replay(packed: bytes) -> None:
    key = next(r["key"] for r in read_bundle(io.BytesIO(packed)).rows if r["SR"] == 0.0)

    def change(rows: list[dict], traces: dict) -> None:
        trace, row = traces[key], _row(rows, key)
        trace["final"]["satisfied"] = [True] * len(trace["final"]["satisfied"])
        trace["final"]["success"] = True
        row.update(episode_metrics(trace))
        reseal(trace, row)

    reasons = _rejected(_verify(edit(packed, change)))
    assert len(reasons) == 1 and reasons[0].startswith(f"{key}: final.satisfied: ")


def test_an_edited_checklist_is_named_as_the_checklist(packed: bytes) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        trace = traces[TRANSPORT]
        trace["checklist"] = trace["checklist"][:1]  # claim a one-atom goal
        trace["final"]["satisfied"] = [True]
        trace["final"]["success"] = True
        reseal(trace, _row(rows, TRANSPORT))

    truth = len(read_bundle(io.BytesIO(packed)).traces[TRANSPORT]["checklist"])
    reasons = _rejected(_verify(edit(packed, change)))
    assert reasons == [f"{TRANSPORT}: checklist: 1 atoms != {truth} (the episode's checklist)"]


def test_an_edited_checklist_atom_is_named_with_its_index(packed: bytes) -> None:
    trace = read_bundle(io.BytesIO(packed)).traces[TRANSPORT]
    genuine = trace["checklist"][1]["key"]

    def change(rows: list[dict], traces: dict) -> None:
        forged = traces[TRANSPORT]
        forged["checklist"][1] = {**forged["checklist"][1], "target": "Sink", "key": "forged"}
        reseal(forged, _row(rows, TRANSPORT))

    reasons = _rejected(_verify(edit(packed, change)))
    assert len(reasons) == 1
    assert reasons[0].startswith(f"{TRANSPORT}: checklist[1]: 'forged' != {genuine!r}")


@pytest.mark.parametrize(
    ("field", "value", "truth"),
    [("task_version", 7, 0), ("family", "search", "transport")],
)
def test_a_row_field_the_registry_knows_is_checked_before_any_replay(
    packed: bytes, field: str, value: object, truth: object
) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        _row(rows, TRANSPORT)[field] = value

    verdict = _verify(edit(packed, change))
    assert _rejected(verdict) == [
        f"episode {TRANSPORT}: {field}: {value!r} != {truth!r} (the task registry's)"
    ]
    assert verdict.episodes == ()


def test_an_observability_other_than_the_manifests_is_refused_before_any_replay(
    packed: bytes,
) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        trace = traces[TRANSPORT]
        trace["config"]["options"]["observability"] = "partial"
        reseal(trace, _row(rows, TRANSPORT))

    verdict = _verify(edit(packed, change))
    assert _rejected(verdict) == [
        f"episode {TRANSPORT}: config.options.observability: 'partial' != 'full' "
        "(the manifest's track)"
    ]
    assert verdict.episodes == ()


def test_a_swapped_seed_is_rejected(packed: bytes) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        trace = traces[TRANSPORT]
        trace["config"]["seed"] = 1
        reseal(trace, _row(rows, TRANSPORT))

    assert _rejected(_verify(edit(packed, change))) == [f"{TRANSPORT}: config.seed: 1 != 0"]


def test_a_row_claiming_another_seed_is_foreign_and_leaves_its_episode_missing(
    packed: bytes,
) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        row = _row(rows, TRANSPORT)
        traces[TRANSPORT.replace("/s0/", "/s5/")] = traces.pop(TRANSPORT)
        row.update(seed=5, key=TRANSPORT.replace("/s0/", "/s5/"))

    assert _rejected(_verify(edit(packed, change))) == [
        f"episode {TRANSPORT.replace('/s0/', '/s5/')}: not an episode of this track",
        f"missing episode {TRANSPORT}",
    ]


def test_an_episode_listed_twice_is_rejected(packed: bytes) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        rows.append(copy.deepcopy(_row(rows, TRANSPORT)))

    assert _rejected(_verify(edit(packed, change))) == [f"episode {TRANSPORT}: listed twice"]


def test_one_trace_submitted_for_two_episodes_is_rejected(packed: bytes) -> None:
    other = TRANSPORT.replace("transport_produce_fridge_v0", "switch_off_kitchen_v0")

    def change(rows: list[dict], traces: dict) -> None:
        traces[other] = copy.deepcopy(traces[TRANSPORT])
        _row(rows, other)["trace_hash"] = traces[TRANSPORT]["trace_hash"]

    reasons = _rejected(_verify(edit(packed, change)))
    assert reasons[0].startswith(f"episode {other}: the same trace as {TRANSPORT} (trace_hash ")
    assert reasons[1:] == [f"missing episode {other}"]


def test_a_missing_run_episode_is_rejected_by_name(packed: bytes) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        rows.remove(_row(rows, TRANSPORT))

    assert _rejected(_verify(edit(packed, change))) == [f"missing episode {TRANSPORT}"]


def test_references_are_optional(packed: bytes) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        rows[:] = [r for r in rows if not r["reference"]]

    verdict = _verify(edit(packed, change))
    assert verdict.ok and len(verdict.episodes) == 6


@pytest.mark.parametrize(
    ("comm", "reason", "replayed"),
    [
        # An env option the track leaves at its default: found when the episode is checked.
        ("on", f"{TRANSPORT}: config.options.token_cap: 16 != 32", True),
        # An option of the manifest's track: refused with the bundle, before any replay.
        (
            "off",
            f"episode {TRANSPORT}: config.options.comm: False != True (the manifest's track)",
            False,
        ),
    ],
)
def test_a_trace_from_another_track_is_rejected(
    packed: bytes, other_tracks: dict, comm: str, reason: str, replayed: bool
) -> None:
    def change(rows: list[dict], traces: dict) -> None:
        traces[TRANSPORT] = other_tracks[comm]
        _row(rows, TRANSPORT)["trace_hash"] = other_tracks[comm]["trace_hash"]

    verdict = _verify(edit(packed, change))
    reasons = _rejected(verdict)
    assert reason in reasons
    assert not [r for r in reasons if "config.options." not in r]
    assert bool(verdict.episodes) is replayed


def test_a_trace_of_an_out_of_tree_task_is_never_replayed(packed: bytes, work: Path) -> None:
    source = Path(__file__).parents[1] / "tasks/transport/transport_produce_fridge_v0.yaml"
    mine = work / "tasks" / "transport_produce_fridge_mine_v0.yaml"
    mine.parent.mkdir(exist_ok=True)
    mine.write_text(
        source.read_text().replace("id: transport_produce_fridge_v0", f"id: {mine.stem}")
    )
    run = read_run(
        run_suite(work / "mine", "suite=smoke", ONE_TASK % mine, "reference=false")["root"]
    )
    trace = run.trace(run.rows[0])
    assert trace["config"]["task_file"]["path"] == str(mine)
    # The forger names the registered task and points the file at one the server lacks.
    trace["config"]["task"] = "transport_produce_fridge_v0"
    trace["config"]["task_file"]["path"] = "/nonexistent/task.yaml"
    reseal(trace)

    def change(rows: list[dict], traces: dict) -> None:
        traces[TRANSPORT] = trace
        _row(rows, TRANSPORT)["trace_hash"] = trace["trace_hash"]

    reasons = _rejected(_verify(edit(packed, change)))
    assert len(reasons) == 1
    assert reasons[0].startswith(
        f"{TRANSPORT}: config.task_file: the task comes from a file outside"
    )
    assert "out-of-tree tasks are not eligible" in reasons[0]


def test_verify_episode_reports_every_config_field_that_differs(packed: bytes) -> None:
    bundle = read_bundle(io.BytesIO(packed))
    trace = copy.deepcopy(bundle.traces[TRANSPORT])
    trace["config"]["options"].update(ambiguity="explicit", message_cost=2)
    trace["config"]["scene"] = "FloorPlan1"
    ref = EpisodeRef("transport_produce_fridge_v0", "test", 0, 2, True)
    check = verify_episode(ref, SMOKE, None, _row(bundle.rows, TRANSPORT), trace)
    assert not check.ok and check.metrics == {} and check.key == TRANSPORT
    assert {r.split(":")[0] for r in check.reasons} == {
        "config.scene",
        "config.options.ambiguity",
        "config.options.message_cost",
        "trace_hash",
        "scene",
    }


def test_an_unknown_suite_version_is_rejected(packed: bytes) -> None:
    contents = members(packed)
    manifest = json.loads(contents["manifest.json"])
    manifest["suite_version"] = "v0"
    contents["manifest.json"] = json.dumps(manifest).encode()
    assert _rejected(_verify(archive(contents))) == [
        "track smoke-v0.n2.comm-on.full.skill: suite smoke is at version v1, the track is for v0"
    ]


@pytest.fixture(scope="module")
def challenged(work: Path) -> tuple[bytes, Path]:
    """The heuristic team (partial observability) answering a challenge of the hidden-seed
    test suite: 2 episodes and their references."""
    path = write_challenge(work / "challenge.json", "ch-0001")
    run = run_suite(work / "test", "suite=test", f"challenge={path}", "baseline=heuristic")
    return pack_run(run["root"], work / "test.tar.gz", {"method": "H"}).read_bytes(), path


def test_a_challenge_submission_verifies_against_its_challenge(challenged: tuple) -> None:
    data, path = challenged
    verdict = _verify(data, load_challenge(path))
    assert verdict.ok, verdict.explanation
    assert verdict.challenge == "ch-0001" and len(verdict.episodes) == 4
    assert verdict.track == Track("test", "v1", 2, True, "partial", "skill")


def test_a_challenge_submission_without_its_challenge_is_rejected(challenged: tuple) -> None:
    reasons = _rejected(_verify(challenged[0]))
    assert reasons == [
        "track test-v1.n2.comm-on.partial.skill: suite test v1 hides its seeds: its episodes "
        "are those of a challenge, and none was given"
    ]


def test_a_challenge_submission_against_a_foreign_challenge_is_rejected(
    challenged: tuple, work: Path
) -> None:
    data, _ = challenged
    foreign = load_challenge(write_challenge(work / "foreign.json", "ch-0002"))
    assert _rejected(_verify(data, foreign)) == ["manifest.challenge: 'ch-0001' != 'ch-0002'"]

    contents = members(data)
    manifest = json.loads(contents["manifest.json"])
    manifest["challenge"] = "ch-0002"
    contents["manifest.json"] = json.dumps(manifest).encode()
    reasons = _rejected(_verify(archive(contents), foreign))
    assert len(reasons) == 4
    assert all("config.options.challenge: 'ch-0001' != 'ch-0002'" in r for r in reasons)


def test_a_process_pool_verifies_as_the_serial_map_does(packed: bytes) -> None:
    bundle = read_bundle(io.BytesIO(packed))
    with ProcessPoolExecutor(max_workers=2) as pool:
        pooled = verify_bundle(bundle, mapper=pool.map)
    assert pooled == verify_bundle(bundle) and pooled.ok


def test_the_cli_prints_the_verdict_and_the_replay_rate(
    packed: bytes, work: Path, capsys: pytest.CaptureFixture
) -> None:
    path = work / "cli.tar.gz"
    path.write_bytes(packed)
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.startswith(
        "verified: track smoke-v1.n2.comm-on.full.skill, 12 episodes replayed"
    )
    figures = measure(read_bundle(io.BytesIO(packed)), repeats=1)
    assert figures["episodes"] == 12 and figures["verified"] is True
    assert figures["episodes_per_s"] > 0 and figures["cold_episodes_per_s"] > 0

    def change(rows: list[dict], traces: dict) -> None:
        _row(rows, TRANSPORT)["SR"] = 0.0

    path.write_bytes(edit(packed, change))
    assert main([str(path)]) == 1
    assert f"  {TRANSPORT}: SR: 0.0 != 1.0" in capsys.readouterr().out.splitlines()
