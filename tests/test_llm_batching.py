"""Batched rollouts: K episodes played at once, their LLM calls sent as one batch per decision
round, with the same traces as one episode after another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.llm.batching import BatchSeat, run_batched
from benchmark.llm.resources import LLMPool, LLMResources
from benchmark.rollout import run_episode

EPISODES = [("switch_off_kitchen_v0", 1), ("search_produce_kitchen_v0", 2)]


def _episode(
    task: str, seed: int, llm: dict, pool: LLMPool, seat: BatchSeat | None = None
) -> tuple[str, dict]:
    env = make_env(task, n_agents=2, seed=seed)
    team = make_team("llm_agents", resources=LLMResources(pool, seat), llm=llm, max_tokens=2)
    trace = run_episode(env, team, seed=seed)
    # Latency is wall time (a batch's is shared by its episodes); everything else must match.
    return trace["trace_hash"], {k: v for k, v in team.metrics().items() if k != "llm/latency_ms"}


@pytest.fixture
def llm(tiny_model: Path) -> dict:
    return {"backend": "hf", "model": str(tiny_model), "options": {}}


def test_batched_episodes_play_as_they_do_one_after_another(llm: dict, llm_pool: LLMPool) -> None:
    alone = [_episode(task, seed, llm, llm_pool) for task, seed in EPISODES]
    together, stats = run_batched(
        [lambda seat, t=t, s=s: _episode(t, s, llm, llm_pool, seat) for t, s in EPISODES]
    )
    assert together == alone
    calls = sum(m["llm/calls"] for _, m in alone)
    # Each decision round of the three episodes was one backend call.
    assert sum(stats.batch_sizes) == calls and stats.batches < calls
    assert max(stats.batch_sizes) == 2 * len(EPISODES)


def test_one_failing_episode_leaves_the_others_to_finish(llm: dict, llm_pool: LLMPool) -> None:
    def broken(seat: BatchSeat) -> None:
        raise RuntimeError("an episode that fails at once")

    task, seed = EPISODES[0]
    results, _ = run_batched([broken, lambda seat: _episode(task, seed, llm, llm_pool, seat)])
    assert isinstance(results[0], RuntimeError)
    trace_hash, metrics = results[1]
    assert len(trace_hash) == 64 and metrics["llm/calls"] > 0


def test_episodes_batched_together_must_share_one_backend(llm: dict, llm_pool: LLMPool) -> None:
    other = {**llm, "options": {"threads": 1}}  # another backend instance
    task, seed = EPISODES[0]
    results, _ = run_batched(
        [
            lambda seat: _episode(task, seed, llm, llm_pool, seat),
            lambda seat: _episode(task, seed, other, llm_pool, seat),
        ]
    )
    errors = [r for r in results if isinstance(r, ValueError)]
    assert len(errors) == 1 and "must share one LLM" in str(errors[0])


ONE_TASK = "suite.entries=[{task:switch_off_kitchen_v0,split:test,n_agents:[2],seeds:[0,1,2]}]"


def _rows(out: Path, *overrides: str) -> dict[str, tuple]:
    from tests.helpers.lb_bundles import run_suite

    run_suite(out, "suite=smoke", ONE_TASK, "reference=false", *overrides)
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return {r["key"]: (r["status"], r["trace_hash"], r["llm/calls"]) for r in rows}


@pytest.mark.slow
def test_the_runner_batches_episodes_with_the_same_rows(tmp_path: Path, tiny_model: Path) -> None:
    llm = (
        "baseline=llm_agents",
        "llm=hf",
        f"llm.model={tiny_model}",
        "baseline.kwargs.max_tokens=2",
    )
    alone = _rows(tmp_path / "alone", *llm)
    together = _rows(tmp_path / "together", *llm, "batch_episodes=3")
    on_ray = _rows(tmp_path / "ray", *llm, "batch_episodes=2", "workers=2")
    assert len(alone) == 3 and {s for s, _, _ in alone.values()} == {"ok"}
    assert together == alone == on_ray


def test_a_batch_of_no_episodes_is_refused(tmp_path: Path) -> None:
    from tests.helpers.lb_bundles import run_suite

    with pytest.raises(ValueError, match="batch_episodes=0 must be at least 1"):
        run_suite(tmp_path / "run", "suite=smoke", "batch_episodes=0")


def test_a_sampled_chat_draws_the_same_tokens_alone_and_in_any_batch(tiny_model: Path) -> None:
    from benchmark.llm.base import Sampling
    from benchmark.llm.hf import HFBackend

    llm = HFBackend(tiny_model)
    a = [{"role": "user", "content": "pick up the apple"}]
    b = [{"role": "user", "content": "open the fridge and look"}]
    hot = Sampling(max_tokens=10, temperature=1.0, seed=11)
    alone = llm.generate([a], hot)[0].token_ids
    seeded = hot.row_seeds(1)[0]
    # The same chat with the same row seed, second in a batch beside another chat.
    batched = llm.generate([b, a], hot, seeds=[5, seeded])[1].token_ids
    assert alone == batched
    # Two chats of one call draw from different generators (not the same random numbers).
    twice = llm.generate([a, a], hot)
    assert twice[0].token_ids == alone and twice[1].token_ids != alone
    with pytest.raises(ValueError, match="seeds: expected one per chat"):
        llm.generate([a, b], hot, seeds=[1])


def test_sampled_training_rollouts_batched_play_as_they_do_one_by_one(tiny_model: Path) -> None:
    from baselines.rl.core.policy import LoraOptions, Policy
    from baselines.rl.core.rollout import EpisodeSpec, RolloutSettings, RolloutWorker

    policy = Policy(tiny_model, lora=LoraOptions(r=4, alpha=8))
    specs = [
        EpisodeSpec("switch_off_bedroom_v0", n_agents=2, seed=s, split="train", gen_seed=g)
        for s, g in [(0, 1), (0, 2), (1, 3)]
    ]
    one = RolloutSettings(team="llm_agents", temperature=1.0)
    worker = RolloutWorker({"shared": lambda: policy}, one)
    alone = worker.play(specs)
    together = worker.play(
        specs, options=RolloutSettings(team="llm_agents", temperature=1.0, batch_episodes=3)
    )

    def ids(results):
        return [[d.gen_ids for ds in r.decisions.values() for d in ds] for r in results]

    assert ids(alone) == ids(together)
    assert ids(alone)[0] != ids(alone)[1]  # the same episode seed, another sampling seed
    assert [r.returns for r in alone] == [r.returns for r in together]
