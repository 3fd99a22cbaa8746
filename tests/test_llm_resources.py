"""The LLM resources a worker lends its teams (:mod:`benchmark.llm.resources`): the teams of a
batch share the worker's one backend, each through its own seat, and an LLM team lent nothing
refuses to start, saying what it lacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from benchmark.agents import Team, make_team
from benchmark.env.views import TaskInfo
from benchmark.llm.batching import BatchedLLM, BatchSeat, run_batched
from benchmark.llm.resources import LLMPool, LLMResources
from benchmark.runner import jobs

INFO = TaskInfo(
    task="transport_apple_fridge_v0",
    family="transport",
    seed=0,
    instruction="Put the apple in the fridge.",
    goal=("all: inside(Apple, Fridge)",),
    agents=("agent_0", "agent_1"),
    cannot={},
    max_ticks=40,
    max_decisions=10,
    action_level="skill",
    observability="partial",
    comm=True,
)
LLM_TEAMS = ["llm_agents", "llm_planner"]


@pytest.fixture
def llm(tiny_model: Path) -> dict:
    return {"backend": "hf", "model": str(tiny_model), "options": {}}


@pytest.mark.parametrize("name", LLM_TEAMS)
def test_the_teams_of_a_batch_share_the_workers_one_backend(
    name: str, llm: dict, tiny_model: Path
) -> None:
    pool = LLMPool()

    def started(seat: BatchSeat | None) -> Any:
        team = make_team(name, resources=LLMResources(pool, seat), llm=llm)
        team.reset(list(INFO.agents), INFO)
        return team.llm

    (a, b), _ = run_batched([started, started])
    assert isinstance(a, BatchedLLM) and isinstance(b, BatchedLLM) and a is not b
    assert a.backend is b.backend is pool.get("hf", str(tiny_model))
    assert len(pool) == 1  # one model for the worker
    # Played one at a time (no seat), a team calls the worker's backend itself.
    assert started(None) is a.backend


@pytest.mark.parametrize("name", LLM_TEAMS)
def test_an_llm_team_lent_no_resources_refuses_to_start(name: str, llm: dict) -> None:
    team = make_team(name, llm=llm)
    with pytest.raises(ValueError, match=r"lent no LLM resources: build it with make_team"):
        team.reset(list(INFO.agents), INFO)
    team.bind(LLMResources())  # a seat-less, pool-less loan
    with pytest.raises(ValueError, match=r"its LLMResources lend none \(llms=None\)"):
        team.reset(list(INFO.agents), INFO)


class Probe(Team):
    """A team that keeps the resources it was lent and ends its episode at once."""

    lent: ClassVar[list[LLMResources]] = []

    def bind(self, resources: LLMResources) -> None:
        Probe.lent.append(resources)

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        self.agents = agent_ids

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        return {a: "done" for a, o in observations.items() if o["needs_decision"]}


def test_the_runner_lends_every_job_the_workers_pool_and_its_batch_seat(monkeypatch) -> None:
    pool = LLMPool()
    monkeypatch.setattr(jobs, "WORKER_LLMS", pool)
    monkeypatch.setattr(Probe, "lent", [])
    job = jobs.Job("switch_off_kitchen_v0", "test", 2, 0, True, f"{__name__}:Probe")
    rows = jobs.run_jobs([job, jobs.Job(**{**job.__dict__, "seed": 1})])
    assert [r["row"]["status"] for r in rows] == ["ok", "ok"]
    assert [lent.llms for lent in Probe.lent] == [pool, pool]
    seats = [lent.batch for lent in Probe.lent]
    assert all(isinstance(s, BatchSeat) for s in seats) and {s.episode for s in seats} == {0, 1}
    jobs.run_jobs([job])  # one job alone plays without a seat
    assert Probe.lent[-1] == LLMResources(pool, None)
