"""The embedded SmolLM2-135M under constraints, on real observations: every decision and plan
parses, a short run of the runner shows no parse failure, and the planner's memory stays small
(its scoring path once grew a Ray worker to 18 GB). All slow: each loads the real model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psutil
import pytest
import yaml

from baselines.llm_agents import LLMAgentsTeam
from baselines.llm_planner import LLMPlannerTeam
from benchmark.env import make_env
from benchmark.env.grammar import parse_action
from benchmark.llm.resources import LLMResources
from benchmark.paths import REPO_ROOT
from benchmark.tasks.decompose import quality

pytestmark = pytest.mark.slow
MB_LIMIT = 2048  # an LLM episode on the embedded model must stay under 2 GB per worker


def _first_observations(task: str):
    env = make_env(task, n_agents=2, seed=0, split="test")
    obs, _ = env.reset(seed=0)
    return env, obs


def test_constrained_smollm2_decisions_and_plans_parse_on_real_observations(llm_pool) -> None:
    env, obs = _first_observations("transport_produce_fridge_v0")
    agents = LLMAgentsTeam(llm={"backend": "smollm2"})
    agents.bind(LLMResources(llm_pool))
    agents.reset(list(env.possible_agents), env.task_info())
    for _ in range(2):
        actions = agents.act(obs)
        for name, line in actions.items():
            call = parse_action(line)
            assert call.target is None or call.target in agents.names[name].by_id, line
        obs, *_ = env.step(actions)
    m = agents.metrics()
    assert m["llm/calls"] >= 2 and m["llm/parse_fail_rate"] == 0.0 and m["llm/fallback_rate"] == 0

    env, obs = _first_observations("transport_produce_fridge_v0")
    planner = LLMPlannerTeam(llm={"backend": "smollm2"}, max_tokens=160, max_replans=0)
    planner.bind(LLMResources(llm_pool))
    planner.reset(list(env.possible_agents), env.task_info())
    planner.act(obs)
    plan = planner.decomposition
    assert plan.ok and plan.constrained and plan.invalid == 0, plan.raw
    assert planner.metrics()["llm/parse_fail_rate"] == 0.0
    q = quality(plan, env.episode.checklist, env.possible_agents)
    assert q["validity"] == 1.0


def _peak_rss(kwargs: dict, decisions: int, kill_mb: int = 3 * MB_LIMIT) -> dict:
    """Run the planner child; kill it past ``kill_mb`` (so a regression cannot take the machine
    down); its own peak RSS report."""
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{REPO_ROOT / 'tests'}"}
    cmd = [sys.executable, "-m", "helpers.llm_memory", json.dumps(kwargs), str(decisions)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT)
    watched = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            rss = watched.memory_info().rss / 2**20
        except psutil.NoSuchProcess:
            break
        if rss > kill_mb:
            proc.kill()
            pytest.fail(f"the planner passed {kill_mb} MB ({kwargs}); killed")
        time.sleep(0.2)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_the_planner_stays_under_2_gb_decoding_or_scoring_plans() -> None:
    grammar = _peak_rss({"max_tokens": 64, "max_replans": 0}, decisions=2)
    assert grammar["llm/calls"] == 1 and grammar["known_objects"] > 0
    assert grammar["peak_rss_mb"] < MB_LIMIT, grammar
    # Candidate scoring over the whole prompt was the 18 GB path: one step of it.
    scoring = _peak_rss({"scoring": True, "max_subtasks": 1, "max_replans": 0}, decisions=1)
    assert scoring["peak_rss_mb"] < MB_LIMIT, scoring


def test_a_short_constrained_run_of_both_llm_baselines_has_no_parse_failures(tmp_path) -> None:
    spec = yaml.safe_load(
        (REPO_ROOT / "tasks/transport/transport_produce_fridge_v0.yaml").read_text()
    )
    spec["id"] = "transport_produce_fridge_short_v0"
    spec["limits"]["decisions"] = 3  # three decisions per agent: a short episode
    task = tmp_path / f"{spec['id']}.yaml"
    task.write_text(yaml.safe_dump(spec))
    cmd = [
        sys.executable,
        "-m",
        "benchmark.run",
        "-m",
        "baseline=llm_agents,llm_planner",
        "suite=smoke",
        "llm=smollm2",
        "++baseline.kwargs.max_tokens=128",
        "workers=0",
        "reference=false",
        "logger.console=false",
        f"suite.entries=[{{task: {task}, split: test, n_agents: [2], seeds: [0]}}]",
        f"hydra.sweep.dir={tmp_path / 'runs'}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [
        json.loads(line)
        for path in sorted((tmp_path / "runs").glob("*/episodes.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert sorted(r["baseline"] for r in rows) == ["llm_agents", "llm_planner"]
    for row in rows:
        assert row["status"] == "ok", row
        assert row["llm/calls"] > 0 and row["llm/parse_fail_rate"] == 0.0, row
        assert row["llm/fallback_rate"] == 0.0, row
    planner = next(r for r in rows if r["baseline"] == "llm_planner")
    assert planner["plan/validity"] == 1.0
