"""OpenObject succeeds from ALFWorld's recorded interaction poses, recorded on an older THOR
build, across all 120 scenes."""

from __future__ import annotations

import collections
import math

from benchmark.sim import Controller, ithor_scenes


def _recorded(object_id: str) -> tuple[str, tuple[float, float, float]]:
    kind, x, y, z = object_id.split("|")[:4]
    return kind, (float(x), float(y), float(z))


def openable_pose_outcomes() -> tuple[int, int, collections.Counter]:
    """(attempts, successes, failure reasons) over every recorded pose of an openable object.

    Each pose is matched to the current object of the same type nearest its recorded position;
    poses whose type no longer exists in the scene, or whose match is not openable (the file
    also lists plain receptacles), are not attempts.
    """
    attempts = successes = 0
    reasons: collections.Counter = collections.Counter()
    for name in ithor_scenes():
        c = Controller(scene=name, agentCount=1, seed=0)
        for recorded_id, (x, z, rotation, horizon) in c.scene.openable_poses.items():
            kind, pos = _recorded(recorded_id)
            same = [s for s in c.scene.specs if s.object_type == kind]
            if not same:
                continue
            target = min(same, key=lambda s: math.dist(s.rest, pos))
            if not target.openable:
                continue
            attempts += 1
            ev = c.step(
                action="Teleport",
                position={"x": x, "y": 0.9, "z": z},
                rotation={"x": 0, "y": rotation, "z": 0},
                horizon=horizon,
            )
            if not ev.metadata["lastActionSuccess"]:
                reasons["teleport: pose not on the reachable grid"] += 1
                continue
            if c.world.objs[target.index].is_open:
                c.step(action="CloseObject", objectId=target.object_id, forceAction=True)
            ev = c.step(action="OpenObject", objectId=target.object_id)
            if ev.metadata["lastActionSuccess"]:
                successes += 1
                assert ev.metadata["objects"][target.index]["isOpen"]
            else:
                reasons[ev.metadata["errorMessage"].replace(target.object_id, "<id>")[:60]] += 1
    return attempts, successes, reasons


def test_open_object_succeeds_from_at_least_90_percent_of_recorded_poses() -> None:
    attempts, successes, reasons = openable_pose_outcomes()
    assert attempts > 900
    rate = successes / attempts
    print(
        f"OpenObject from recorded poses: {successes}/{attempts} = {rate:.4f}; "
        f"failures {dict(reasons)}"
    )
    assert rate >= 0.90, (rate, reasons)
