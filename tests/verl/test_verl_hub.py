"""The episode hub as a Ray actor: agents of one episode on different worker processes meet in
one environment, rollout copies pair up, and a missing agent fails with an error naming it.

The agents here are scripted (no model): each worker actor plays the given agents through the
hub the way the agent loop does (join, then exchange actions until the episode ends).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import asdict
from typing import Any

import pytest
import ray

from baselines.verl.hub import EpisodeHub, HubError, ray_hub
from baselines.verl.rows import EpisodeRow
from benchmark.tasks.episode import make_episode
from benchmark.tasks.spec import resolve_task


@ray.remote(num_cpus=0)
class ScriptedWorker:
    """A stand-in for an AgentLoopWorker process: plays agents with fixed action lists."""

    async def play(
        self, hub_name: str, row: dict[str, Any], actions: list[str], session: int | None
    ) -> dict[str, Any]:
        hub = ray.get_actor(hub_name)
        cid = await hub.join.remote(row, {}, session)
        turn = await hub.exchange.remote(cid, row["agent"], None)
        seen, k = len(turn["observations"]), 0
        while turn["decide"]:
            action = actions[k] if k < len(actions) else "done"
            k += 1
            turn = await hub.exchange.remote(cid, row["agent"], action)
            seen += len(turn["observations"])
        return {"copy": cid, "decisions": k, "seen": seen, **turn["result"]}


@pytest.fixture(scope="module")
def row(short_task: str) -> EpisodeRow:
    scene = make_episode(resolve_task(short_task), None, 2, 5, split="train").scene
    return EpisodeRow(short_task, scene, 5, 2, "agent_0", "train")


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    """Equal metric dicts, NaN (an undefined metric) equal to NaN."""
    both_nan = [k for k in a if math.isnan(a[k]) and math.isnan(b[k])]
    return a.keys() == b.keys() and all(a[k] == b[k] or k in both_nan for k in a)


def _agent(row: EpisodeRow, k: int) -> dict[str, Any]:
    return {**asdict(row), "agent": f"agent_{k}"}


def test_copies_pair_by_arrival_across_workers(row: EpisodeRow, ray_local: Any) -> None:
    """All three copies of agent_0 on one worker, those of agent_1 on another, arriving in
    any order: each copy gets both agents, and each copy plays its own episode (copy k's
    agent_0 explores k times before it is done, so the copies end at different ticks)."""
    hub = ray_hub("arrival_hub", timeout_s=60.0)  # held: an unreferenced actor is collected
    w0, w1 = ScriptedWorker.remote(), ScriptedWorker.remote()
    n = 3
    first = [w0.play.remote("arrival_hub", _agent(row, 0), ["explore"] * k, None) for k in range(n)]
    second = [w1.play.remote("arrival_hub", _agent(row, 1), [], None) for _ in range(n)]
    a0, a1 = ray.get(first), ray.get(second)
    assert sorted(r["copy"] for r in a0) == sorted(r["copy"] for r in a1)
    assert len({r["copy"] for r in a0}) == n
    by_copy = {r["copy"]: r for r in a1}
    for r in a0:
        partner = by_copy[r["copy"]]
        assert partner["ticks"] == r["ticks"] and _same(partner["metrics"], r["metrics"])
        assert r["metrics"]["task/L_decisions"] == r["decisions"] + partner["decisions"]
    assert len({r["ticks"] for r in a0}) == n  # three different episodes
    assert ray.get(hub.pending.remote()) == []


def test_sessions_name_the_copies(row: EpisodeRow, ray_local: Any) -> None:
    """verl V1 gives each of a row's n loops its session_id: agents meet by it, whatever the
    order of arrival."""
    hub = ray_hub("session_hub", timeout_s=60.0)
    w0, w1 = ScriptedWorker.remote(), ScriptedWorker.remote()
    a0 = [w0.play.remote("session_hub", _agent(row, 0), ["explore"] * s, s) for s in (1, 0)]
    a1 = [w1.play.remote("session_hub", _agent(row, 1), ["wait"] * s, s) for s in (0, 1)]
    r0, r1 = ray.get(a0), ray.get(a1)
    key = row.episode_key
    assert [r["copy"] for r in r0] == [f"{key}#1", f"{key}#0"]
    assert [r["copy"] for r in r1] == [f"{key}#0", f"{key}#1"]
    assert r0[0]["decisions"] == r1[1]["decisions"] == 2  # session 1: one step, then done
    assert ray.get(hub.pending.remote()) == []


def test_missing_row_times_out_naming_the_agent(row: EpisodeRow, ray_local: Any) -> None:
    hub = ray_hub("timeout_hub", timeout_s=1.0)
    cid = ray.get(hub.join.remote(_agent(row, 0), {}, None))
    with pytest.raises(HubError) as err:
        ray.get(hub.exchange.remote(cid, "agent_0", None))
    text = str(err.value)
    assert row.episode_key in text and "['agent_1'] did not join" in text
    assert "data.shuffle=false" in text
    assert ray.get(hub.pending.remote()) == []


def test_silent_agent_times_out_and_fails_the_copy() -> None:
    """agent_1 joins but never answers: agent_0 learns which agent and tick, and agent_1's
    late call gets the same error instead of waiting."""

    async def scenario(row: EpisodeRow) -> tuple[str, str]:
        hub = EpisodeHub(timeout_s=0.5)
        cid = await hub.join(_agent(row, 0), {}, None)
        await hub.join(_agent(row, 1), {}, None)
        await hub.exchange(cid, "agent_0", None)
        with pytest.raises(HubError) as first:
            await hub.exchange(cid, "agent_0", "explore")
        with pytest.raises(HubError) as late:
            await hub.exchange(cid, "agent_1", None)
        assert await hub.pending() == []
        return str(first.value), str(late.value)

    scene = make_episode(resolve_task("transport_apple_fridge_v0"), None, 2, 5, split="train")
    row = EpisodeRow("transport_apple_fridge_v0", scene.scene, 5, 2, "agent_0", "train")
    first, late = asyncio.run(scenario(row))
    assert "no action from ['agent_1'] at tick 0" in first and row.episode_key in first
    assert late == first


def test_agents_of_a_copy_must_play_the_same_options(row: EpisodeRow) -> None:
    async def scenario() -> None:
        hub = EpisodeHub(timeout_s=5.0)
        await hub.join(_agent(row, 0), {"reward_sharing": 0.7}, 0)
        await hub.join(_agent(row, 1), {"reward_sharing": 0.2}, 0)

    with pytest.raises(HubError, match="agent_1 plays with"):
        asyncio.run(scenario())


def test_a_failed_loop_fails_its_copy_at_once(row: EpisodeRow) -> None:
    """agent_1's loop fails while agent_0 waits for it: agent_0 gets the reason, without
    waiting out the (long) timeout."""

    async def scenario() -> str:
        hub = EpisodeHub(timeout_s=600.0)
        cid = await hub.join(_agent(row, 0), {}, None)
        await hub.join(_agent(row, 1), {}, None)
        await hub.exchange(cid, "agent_0", None)
        waiting = asyncio.create_task(hub.exchange(cid, "agent_0", "explore"))
        await asyncio.sleep(0)
        await hub.abandon(cid, "agent_1", "RuntimeError: server gone")
        with pytest.raises(HubError) as err:
            await waiting
        assert await hub.pending() == []
        return str(err.value)

    text = asyncio.run(scenario())
    assert "agent_1's agent loop failed: RuntimeError: server gone" in text
    assert row.episode_key in text
