"""Simulator and environment speed: ``python -m benchmark.bench sim`` and ``... env``.

Figures are wall-clock measurements on the calling process (one core); run them on an idle
machine and compare medians across repeats.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmark.sim.actions import NAVIGATION

PRIMITIVES = (
    *NAVIGATION,
    "PickupObject",
    "PutObject",
    "OpenObject",
    "CloseObject",
    "ToggleObjectOn",
    "ToggleObjectOff",
    "DropHandObject",
)

NO_TARGET = frozenset((*NAVIGATION, "DropHandObject"))


def random_actions(object_ids: list[str], count: int, seed: int) -> list[dict[str, Any]]:
    """Well-formed primitive actions with random targets (many are impossible, as in play)."""
    rng = np.random.default_rng(seed)
    names = rng.choice(len(PRIMITIVES), size=count)
    targets = rng.choice(len(object_ids), size=count)
    out = []
    for n, t in zip(names, targets, strict=True):
        name = PRIMITIVES[n]
        act: dict[str, Any] = {"action": name}
        if name not in NO_TARGET:
            act["objectId"] = object_ids[t]
        out.append(act)
    return out


def _best_rate(run: Callable[[], int], repeats: int) -> float:
    """Highest units/second over ``repeats`` runs (the least disturbed one)."""
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        units = run()
        best = max(best, units / (time.perf_counter() - start))
    return best


def bench_sim(
    steps: int = 20000,
    repeats: int = 3,
    scene: str = "FloorPlan1",
    load_scenes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Primitive agent-steps/s (2 agents, metadata not read), one full metadata read, a reset,
    and the cold load of every scene in ``load_scenes`` (default: all 120 iTHOR scenes):
    ``scene_load_ms`` is the slowest (named by ``scene_load_slowest``), with the median."""
    from benchmark.sim import Controller, ithor_scenes
    from benchmark.sim.scene import _load

    c = Controller(scene=scene, agentCount=2, seed=0)
    ids = [s.object_id for s in c.scene.specs]
    plan = random_actions(ids, steps, seed=0)
    pairs = [plan[k : k + 2] for k in range(0, steps - 1, 2)]

    def run_multi() -> int:
        c.reset(seed=0)
        for pair in pairs:
            c.multi_step(pair)
        return 2 * len(pairs)

    def run_single() -> int:
        c.reset(seed=0)
        for k, act in enumerate(plan):
            c.step(act, agentId=k % 2)
        return len(plan)

    multi_rate = _best_rate(run_multi, repeats)
    single_rate = _best_rate(run_single, repeats)

    c.reset(seed=0)
    meta_times = []
    for k in range(300):
        ev = c.step(plan[k], agentId=0)
        start = time.perf_counter()
        _ = ev.events[0].metadata
        meta_times.append(time.perf_counter() - start)

    reset_times = []
    for k in range(50):
        start = time.perf_counter()
        c.reset(seed=k)
        reset_times.append(time.perf_counter() - start)

    # Cold: the scene cache is cleared, so each load reads and builds the scene file.
    load_ms = {}
    for name in ithor_scenes() if load_scenes is None else load_scenes:
        _load.cache_clear()
        start = time.perf_counter()
        Controller(scene=name, agentCount=2)
        load_ms[name] = 1000 * (time.perf_counter() - start)
    slowest = max(load_ms, key=load_ms.__getitem__)

    return {
        "bench": "sim",
        "scene": scene,
        "agents": 2,
        "agent_steps_per_s": round(multi_rate),
        "agent_steps_per_s_single_step": round(single_rate),
        "metadata_ms": round(1000 * float(np.median(meta_times)), 3),
        "metadata_objects": len(ids),
        "reset_ms": round(1000 * float(np.median(reset_times)), 3),
        "scene_load_ms": round(load_ms[slowest], 1),
        "scene_load_slowest": slowest,
        "scene_load_ms_median": round(float(np.median(list(load_ms.values()))), 1),
        "scenes_loaded": len(load_ms),
        "python": platform.python_version(),
    }


def bench_env(
    episodes: int = 60, repeats: int = 3, task: str = "transport_produce_fridge_v0"
) -> dict[str, Any]:
    """Scripted oracle team, skill level, 2 agents, on a transport task (episode set-up
    included); ``env_step_us`` is the mean wall time of one ``env.step`` call."""
    from benchmark.agents import make_team
    from benchmark.env import make_env

    env = make_env(task, n_agents=2, seed=0, observability="full")
    team = make_team("oracle")
    outcome: dict[str, Any] = {}

    def run() -> int:
        successes = steps = 0
        step_time = 0.0
        for seed in range(episodes):
            obs, _ = env.reset(seed=seed)
            team.reset(list(env.possible_agents), env.task_info())
            infos: dict[str, Any] = {}
            while env.agents:
                actions = team.act(obs)
                start = time.perf_counter()
                obs, _, _, _, infos = env.step(actions)
                step_time += time.perf_counter() - start
                steps += 1
            successes += next(iter(infos.values()))["trace"]["final"]["success"]
        outcome.update(sr=successes / episodes, step_us=1e6 * step_time / steps)
        return episodes

    rate = _best_rate(run, repeats)
    return {
        "bench": "env",
        "task": task,
        "agents": 2,
        "oracle_episodes_per_s": round(rate, 1),
        "oracle_sr": round(outcome["sr"], 3),
        "env_step_us": round(outcome["step_us"], 1),
        "python": platform.python_version(),
    }
