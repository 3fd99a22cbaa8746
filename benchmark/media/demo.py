"""A scripted two-agent episode on the embedded simulator: ``python -m benchmark.media.demo``.

In FloorPlan1, agent 0 walks to the fridge and opens it while agent 1 fetches the apple; then
agent 1 puts the apple in the fridge. Both act in the same ticks through ``multi_step``. The
script prints every tick and writes a top-down PNG of the final state.
"""

from __future__ import annotations

import argparse
from collections import deque
from pathlib import Path

from benchmark.sim import Controller
from benchmark.sim.planning import interaction_poses, shortest_path, step_towards
from benchmark.sim.render import save_png
from benchmark.sim.world import World


class ScriptedAgent:
    """Runs a list of goals: ``("goto", objectId)`` or ``("do", action dict)``, one primitive
    action per tick, re-planning its path whenever another agent blocks it."""

    def __init__(self, index: int, goals: list[tuple[str, object]]) -> None:
        self.index = index
        self.goals = deque(goals)
        self.wait_for: set[str] = set()

    def next_action(self, world: World) -> dict | None:
        agent = world.agents[self.index]
        while self.goals:
            kind, arg = self.goals[0]
            if kind == "wait":
                if world.objs[world.index_of[str(arg)]].is_open:
                    self.goals.popleft()
                    continue
                return None
            if kind == "do":
                self.goals.popleft()
                return dict(arg)  # type: ignore[call-overload]
            poses = interaction_poses(world, self.index, world.index_of[str(arg)])
            here = [p for p in poses if (p.i, p.j) == (agent.i, agent.j)]
            if here:
                pose = min(
                    here,
                    key=lambda p: (p.rotation != agent.rotation, abs(p.horizon - agent.horizon)),
                )
                if pose.rotation != agent.rotation:
                    return {"action": "Teleport", "rotation": pose.rotation}
                if pose.horizon != agent.horizon:
                    act = "LookDown" if pose.horizon > agent.horizon else "LookUp"
                    return {"action": act, "degrees": abs(pose.horizon - agent.horizon)}
                self.goals.popleft()
                continue
            path = shortest_path(
                world, (agent.i, agent.j), {(p.i, p.j) for p in poses}, exclude=self.index
            )
            if not path:
                return None
            return step_towards((agent.i, agent.j), path[0], agent.rotation)[0]
        return None

    @property
    def done(self) -> bool:
        return not self.goals


def run(
    scene: str = "FloorPlan1", seed: int = 0, out_dir: str = "outputs/demo", max_ticks: int = 200
) -> int:
    c = Controller(scene=scene, agentCount=2, seed=seed)
    world = c.world
    apple = next(s.object_id for s in world.specs if s.object_type == "Apple")
    fridge = next(s.object_id for s in world.specs if s.object_type == "Fridge")
    agents = [
        ScriptedAgent(0, [("goto", fridge), ("do", {"action": "OpenObject", "objectId": fridge})]),
        ScriptedAgent(
            1,
            [
                ("goto", apple),
                ("do", {"action": "PickupObject", "objectId": apple}),
                ("goto", fridge),
                ("wait", fridge),
                ("do", {"action": "PutObject", "objectId": fridge}),
            ],
        ),
    ]
    print(f"{scene}, 2 agents, seed {seed}: agent 0 opens the {fridge}; agent 1 brings the {apple}")
    tick = 0
    while tick < max_ticks and not all(a.done for a in agents):
        actions = [a.next_action(c.world) for a in agents]
        event = c.multi_step(actions)
        for k, act in enumerate(actions):
            if act is None:
                continue
            meta = event.events[k].metadata
            status = "ok" if meta["lastActionSuccess"] else f"FAILED ({meta['errorMessage']})"
            args = {key: v for key, v in act.items() if key != "action"}
            print(f"tick {tick:3d}  agent {k}  {act['action']:<13} {args if args else ''} {status}")
        tick += 1
    final = c.last_event.metadata
    apple_meta = next(o for o in final["objects"] if o["objectId"] == apple)
    success = bool(apple_meta["parentReceptacles"]) and apple_meta["parentReceptacles"][0] == fridge
    print(f"after {tick} ticks: apple in {apple_meta['parentReceptacles']}; success={success}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{scene}_final.png"
    save_png(c.world, png)
    print(f"top-down map written to {png.resolve()}")
    return 0 if success else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scene", default="FloorPlan1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default="outputs/demo")
    args = parser.parse_args(argv)
    return run(args.scene, args.seed, args.out_dir)


if __name__ == "__main__":
    raise SystemExit(main())
