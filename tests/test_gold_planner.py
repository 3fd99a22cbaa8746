"""The gold decomposition: llm_planner's executor carrying out the oracle's plan, and what the
executor does under partial observability (explores for targets it does not know, tells a
teammate the target it needs)."""

from __future__ import annotations

from baselines.gold_planner import GoldPlanTeam, gold_plan
from baselines.llm_planner import LLMPlannerTeam
from benchmark.agents import make_team
from benchmark.env import make_env
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode
from benchmark.tasks.decompose import Decomposition, Subtask

TASK = "transport_apple_fridge_v0"


def test_the_gold_plan_is_the_oracles_interactions_in_a_twin_of_the_episode() -> None:
    env = make_env(TASK, n_agents=2, seed=0, split="val")
    env.reset()
    info = env.task_info()
    assert info.scene is not None
    plan = gold_plan(info)
    oracle = run_episode(
        make_env(TASK, n_agents=2, seed=0, split="val", observability="full"),
        make_team("oracle"),
        seed=0,
    )
    done = [
        (r["agent"], f"{r['skill']} {r['target']}")
        for r in oracle["skills"]
        if r["success"] and r["skill"] not in ("navigate", "explore", "wait")
    ]
    assert plan.ok and [(s.agent, s.action) for s in plan.subtasks] == done
    for k, s in enumerate(plan.subtasks):  # each after the same agent's previous subtask
        before = [p.id for p in plan.subtasks[:k] if p.agent == s.agent]
        assert list(s.after) == before[-1:]


def test_the_executor_solves_the_gold_plan_without_walking_to_unknown_objects() -> None:
    env = make_env(TASK, n_agents=2, seed=0, split="val")
    env.reset()
    team = GoldPlanTeam()
    trace = run_episode(env, team, seed=0)
    assert episode_metrics(trace)["SR"] == 1.0
    assert team.metrics() == {"plan/replans": 0, "plan/subtasks": len(team.plan().subtasks)}
    # A walk to an object the agent does not know fails every time: the executor explores.
    assert not [r for r in trace["skills"] if r.get("reason") == "not_known"]


def test_an_agent_tells_a_teammate_where_the_target_of_its_subtask_is() -> None:
    env = make_env(TASK, n_agents=2, seed=0, split="val")
    obs, _ = env.reset(seed=0)
    team = LLMPlannerTeam(llm=None)
    team.start(list(env.possible_agents), env.task_info())
    team.replans = 0
    apple = gold_plan(env.task_info()).subtasks[0].target
    team.decomposition = Decomposition(
        ok=True, subtasks=[Subtask("s1", "pickup", apple, (), "agent_1")]
    )
    # agent_0 sees the apple (as if it had looked), agent_1 does not know it.
    obs["agent_0"]["visible"] = [{"objectId": apple}]
    obs["agent_1"]["visible"] = []
    team._learn(obs)
    said = team._announce("agent_0", obs["agent_0"])
    assert said == f" | say agent_1: found {apple}"
    assert team._announce("agent_0", obs["agent_0"]) == ""  # once
    team.comm = False
    team.told.clear()
    assert team._announce("agent_0", obs["agent_0"]) == ""  # not without messages


def test_the_gold_plan_schedules_a_joint_lift_and_the_executor_meets_its_partner() -> None:
    env = make_env("heavy_box_sofa_v0", n_agents=2, seed=0, split="test")
    env.reset()
    team = GoldPlanTeam()
    trace = run_episode(env, team, seed=0)
    lifts = [s for s in team.plan().subtasks if s.skill == "lift"]
    assert {s.agent for s in lifts} == {"agent_0", "agent_1"}  # one subtask per lifter
    assert episode_metrics(trace)["SR"] == 1.0
    # A lift alone waits for the partner; it is neither counted as a failure nor given up.
    assert not team.futile


def test_the_put_after_a_joint_lift_goes_to_the_lifter_that_holds_the_object() -> None:
    # Here the plan gives the put to the lifter that does not end up holding the laptop.
    env = make_env("heavy_laptop_sofa_v0", n_agents=2, seed=0, split="test")
    env.reset()
    team = GoldPlanTeam()
    planned = {s.id: s.agent for s in gold_plan(env.task_info()).subtasks if s.skill == "put"}
    trace = run_episode(env, team, seed=0)
    assert episode_metrics(trace)["SR"] == 1.0
    puts = [r for r in trace["skills"] if r["skill"] == "put" and r["success"]]
    assert puts and {s.agent for s in team.plan().subtasks if s.id in planned} == {puts[0]["agent"]}
    assert [r for r in trace["skills"] if r.get("reason") == "hands_empty"] == []
