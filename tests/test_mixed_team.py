"""Mixed teams (benchmark/agents/mixed.py): each agent played by its own member, on the real
simulator. The members act for their own agents only, the trace records who played whom, a
mixed episode replays and reruns to the same hash, the runner's rows carry the members, and a
member list that cannot be played is refused naming what is wrong."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from rich.console import Console

from benchmark.agents import make_team
from benchmark.agents.mixed import MixedTeam, parse_members
from benchmark.env import make_env
from benchmark.env.replay import replay
from benchmark.paths import CONFIGS_DIR
from benchmark.rollout import rerun_seats, run_episode
from benchmark.runner.app import run
from benchmark.runner.config import register_configs

IDLE = "helpers.teams:IdleTeamForTests"
TASK = "transport_apple_fridge_v0"


def _heuristic_and_idle() -> list[dict]:
    return [{"agents": ["agent_0"], "baseline": "heuristic"}, {"baseline": IDLE}]


def _play(members: list[dict], seed: int = 0, n_agents: int = 2) -> dict:
    env = make_env(TASK, n_agents=n_agents, seed=seed)
    return run_episode(env, MixedTeam(members), seed=seed)


def test_each_member_plays_only_its_own_agents_and_the_trace_says_who() -> None:
    trace = _play(_heuristic_and_idle())
    assert trace["members"] == {"agent_0": "heuristic", "agent_1": IDLE}
    by_agent: dict[str, set[str]] = {"agent_0": set(), "agent_1": set()}
    for step in trace["decisions"]:
        for agent, action in step["actions"].items():
            by_agent[agent].add(action.split()[0])
    assert by_agent["agent_1"] == {"wait"}
    assert by_agent["agent_0"] - {"wait"}, "the heuristic member acts"


def test_a_mixed_episode_replays_and_reruns_to_the_same_hash() -> None:
    trace = _play(_heuristic_and_idle(), seed=2)
    result = replay(trace)
    assert result.ok and result.hash_matches
    assert _play(_heuristic_and_idle(), seed=2)["trace_hash"] == trace["trace_hash"]
    forged = {**trace, "members": {"agent_0": IDLE, "agent_1": "heuristic"}}
    assert not replay(forged).hash_matches, "the members are part of the hashed trace"


def test_rerunning_a_member_on_its_agents_finds_its_decisions_and_the_first_departure() -> None:
    quiet = {"baseline": "heuristic", "kwargs": {"silent": True}, "label": "quiet"}
    env = make_env("transport_produce_fridge_v0", n_agents=3, seed=4, split="test")
    trace = run_episode(env, MixedTeam([{"agents": [0], "baseline": "heuristic"}, quiet]), seed=4)
    seats = ["agent_1", "agent_2"]
    assert rerun_seats(trace, make_team("heuristic", silent=True), seats) is None
    departure = rerun_seats(trace, make_team("heuristic"), seats)
    assert departure is not None and departure.agent in seats
    step = next(s for s in trace["decisions"] if s["tick"] == departure.tick)
    assert step["actions"][departure.agent] == departure.recorded
    # Up to there the two played alike: the talking heuristic departs by what it says.
    assert "| say " in departure.rerun and "| say " not in departure.recorded
    with pytest.raises(ValueError, match="not agents of the episode"):
        rerun_seats(trace, make_team("heuristic"), ["agent_5"])


def test_a_homogeneous_team_records_no_members() -> None:
    env = make_env(TASK, n_agents=2, seed=0)
    trace = run_episode(env, make_team("heuristic"), seed=0)
    assert "members" not in trace


def test_the_same_agents_as_a_whole_team_play_the_same_when_one_member_plays_all() -> None:
    """One member for every agent is the whole team: the same decisions, step by step."""
    whole = run_episode(make_env(TASK, n_agents=2, seed=1), make_team("heuristic"), seed=1)
    mixed = _play([{"baseline": "heuristic"}], seed=1)
    assert mixed["decisions"] == whole["decisions"]
    assert mixed["final"] == whole["final"]


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ([], "non-empty list"),
        (
            [{"agents": [0], "baseline": "heuristic"}, {"agents": [0], "baseline": "random"}],
            "agent_0 is played by members\\[0\\] already",
        ),
        (
            [{"baseline": "heuristic"}, {"agents": [1], "baseline": "random"}],
            "only the last member may leave 'agents' out",
        ),
        ([{"baseline": "heuristic", "prompt": "x"}], "unknown fields \\['prompt'\\]"),
        ([{"baseline": "llm_agents", "llm": "gpt9"}], "no configs/llm/gpt9.yaml"),
        (
            [{"baseline": "llm_agents", "llm": "smollm2", "llm_options": {"adaptor": "x"}}],
            "unknown fields \\['adaptor'\\]",
        ),
        ([{"agents": ["bob"], "baseline": "heuristic"}], "neither agent_<k> nor an index"),
    ],
)
def test_a_member_list_that_cannot_be_played_is_refused_naming_why(members, says) -> None:
    with pytest.raises(ValueError, match=says):
        parse_members(members)


def test_agents_no_member_plays_are_refused_at_reset() -> None:
    team = MixedTeam([{"agents": [0], "baseline": "heuristic"}])
    with pytest.raises(ValueError, match=r"no member plays \['agent_1'\]"):
        run_episode(make_env(TASK, n_agents=2, seed=0), team, seed=0)


def test_an_llm_member_gets_its_llm_config_and_a_label_naming_it() -> None:
    spec = parse_members(
        [
            {"agents": [0], "baseline": "heuristic"},
            {
                "baseline": "llm_agents",
                "llm": "smollm2",
                "llm_options": {"adapter": "smollm2-agents-v4-dagger"},
                "kwargs": {"prompt": "llm_agents_v4"},
            },
        ]
    )
    llm = spec[1].kwargs["llm"]
    assert (llm["backend"], llm["adapter"], llm["constrained"]) == (
        "smollm2",
        "smollm2-agents-v4-dagger",
        True,
    )
    assert spec[1].label == "llm_agents/smollm2+smollm2-agents-v4-dagger"
    assert spec[1].kwargs["prompt"] == "llm_agents_v4" and spec[0].label == "heuristic"


def _run_mixed(out: Path, suite: str) -> dict:
    """The runner, inline, with the default mixed team (heuristic on agent_0, random the rest)."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base="1.3"):
        cfg = compose(
            "run",
            overrides=[
                f"output_dir={out}",
                "logger.console=false",
                "baseline=mixed",
                suite,
                "workers=0",
            ],
        )
    return run(cfg, Console(quiet=True))


def test_the_runner_plays_a_mixed_team_and_its_rows_carry_the_members(tmp_path: Path) -> None:
    entries = f"suite.entries=[{{task: {TASK}, split: test, n_agents: [2], seeds: [0, 1]}}]"
    result = _run_mixed(tmp_path, entries)
    rows = [r for r in result["rows"] if not r.get("reference")]
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    for row in rows:
        assert row["members"] == {"agent_0": "heuristic", "agent_1": "random"}
    references = [r for r in result["rows"] if r.get("reference")]
    assert references and all(r["members"] == {"agent_0": "heuristic"} for r in references)


def test_a_mixed_run_is_packed_and_verified_by_the_leaderboard(tmp_path: Path) -> None:
    from helpers.lb_bundles import edit

    from leaderboard.client.pack import pack_run
    from leaderboard.core.bundle import read_bundle
    from leaderboard.core.verify import verify_bundle

    _run_mixed(tmp_path / "run", "suite=smoke")
    packed = pack_run(tmp_path / "run", tmp_path / "mixed.tar.gz", {"method": "mixed"})
    data = packed.read_bytes()
    verdict = verify_bundle(read_bundle(io.BytesIO(data)))
    assert verdict.ok, verdict.explanation
    assert verdict.episodes and all(c.ok for c in verdict.episodes)

    def swap_row(rows: list[dict], traces: dict) -> None:  # claim the heuristic played agent_1
        rows[0]["members"] = {"agent_0": "random", "agent_1": "heuristic"}

    row_forged = verify_bundle(read_bundle(io.BytesIO(edit(data, swap_row))))
    assert not row_forged.ok and "members" in " ".join(row_forged.explanation)
    # Members are a claim of the submitter, like the baseline's name: replay checks that the
    # row and the hashed trace agree, not who chose the actions.

    def member_stats(name: str):  # an LLM member's own numbers, under its place in the list
        def add(rows: list[dict], traces: dict) -> None:
            rows[0][name] = 1234

        return add

    with_stats = verify_bundle(
        read_bundle(io.BytesIO(edit(data, member_stats("member1/llm/tokens_in"))))
    )
    assert with_stats.ok, with_stats.explanation
    from leaderboard.core.bundle import BundleError

    with pytest.raises(BundleError, match="member1/llm/tokens/in"):
        read_bundle(io.BytesIO(edit(data, member_stats("member1/llm/tokens/in"))))


def test_llm_members_on_one_model_share_the_workers_backend_in_a_batch(
    tiny_model: Path, monkeypatch
) -> None:
    """Two LLM members with their own settings on one model: one backend in the worker's pool,
    and the two episodes of a batch, both members of each, decode through it together."""
    from benchmark.llm.resources import LLMPool
    from benchmark.runner import jobs

    pool = LLMPool()
    monkeypatch.setattr(jobs, "WORKER_LLMS", pool)
    llm = {"backend": "hf", "model": str(tiny_model), "options": {}}
    members = [
        {
            "agents": [0],
            "baseline": "llm_agents",
            "llm": llm,
            "label": "v4",
            "kwargs": {"prompt": "llm_agents_v4"},
        },
        {
            "baseline": "llm_agents",
            "llm": llm,
            "label": "v3",
            "kwargs": {"prompt": "llm_agents_v3"},
        },
    ]
    job = jobs.Job(
        "switch_off_kitchen_v0",
        "test",
        2,
        0,
        True,
        "mixed",
        team_kwargs={"members": members},
        team="mixed",
    )
    results = jobs.run_jobs([job, jobs.Job(**{**job.__dict__, "seed": 1})])
    rows = [r["row"] for r in results]
    assert [r["status"] for r in rows] == ["ok", "ok"], rows
    assert len(pool) == 1  # one model for both members of both episodes
    for row in rows:
        assert row["members"] == {"agent_0": "v4", "agent_1": "v3"}
        assert row["member0/llm/calls"] > 0 and row["member1/llm/calls"] > 0


def test_the_oracle_as_a_member_plays_its_first_agents_beside_another_team() -> None:
    """The oracle's plan indexes the world's agents: as agent_0 beside another team it plays
    (an idle oracle agent near the partner once looked up the partner's queue and failed),
    and given agent_1 alone it refuses, saying what it needs."""
    task = "switch_off_kitchen_v0"
    partner = {
        "label": "policy-tiny",
        "baseline": "policy",
        "kwargs": {"checkpoint": "baselines/adapters/policy-tiny-families"},
    }
    env = make_env(task, n_agents=2, seed=1000006, split="val", observability="full")
    oracle = {"agents": [0], "baseline": "oracle", "label": "oracle"}
    trace = run_episode(env, MixedTeam([oracle, partner]), seed=1000006)
    assert trace["members"] == {"agent_0": "oracle", "agent_1": "policy-tiny"}
    env = make_env(task, n_agents=2, seed=0, split="val", observability="full")
    with pytest.raises(ValueError, match=r"the oracle plays agent_0 to agent_<m-1>"):
        run_episode(env, MixedTeam([{**oracle, "agents": [1]}, {"baseline": "heuristic"}]), seed=0)
