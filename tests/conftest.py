"""Shared fixtures: the real iTHOR scene assets, fetched and built once per machine, and a real
PostgreSQL cluster per test process."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

# One pytest-xdist worker per core (PYTEST_WORKERS in the Makefile): torch's default of a thread
# per core would put every worker's threads on every core, and spinning OpenMP threads that share
# a core slow each other down several-fold. Set before torch is first imported; the processes a
# test starts (Ray workers, training runs) inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from helpers.postgres import PostgresCluster, find_pg_bin

from benchmark.assets import ALFWORLD, PROCTHOR, raw_dir
from benchmark.paths import cache_dir
from benchmark.sim import Controller
from benchmark.sim.scene_cache import ensure_scene_assets


@pytest.fixture(scope="session")
def scene_dir() -> Path:
    return ensure_scene_assets()


@pytest.fixture(scope="session")
def recorded_metadata(scene_dir: Path) -> dict:
    """AI2-THOR's recorded object metadata, straight from the procthor wheel."""
    path = raw_dir(PROCTHOR, cache_dir()) / PROCTHOR.members[0]
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def layouts_dir(scene_dir: Path) -> Path:
    """The ALFWorld layout files (reachable grids and openable poses)."""
    return raw_dir(ALFWORLD, cache_dir()) / "alfworld/gen/layouts"


def metadata_hash(event) -> str:
    """Hash of every agent's full metadata: equal hashes mean equal observable state."""
    payload = [e.metadata for e in event.events]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def state_hash(controller: Controller) -> str:
    """Hash of the observable state of every agent, independent of the last action fields."""
    ev = controller.step(action="Pass")
    payload = []
    for e in ev.events:
        meta = dict(e.metadata)
        for key in ("lastAction", "lastActionSuccess", "errorMessage", "actionReturn"):
            meta.pop(key)
        payload.append(meta)
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def face(controller: Controller, object_id: str, agent: int = 0) -> None:
    """Teleport ``agent`` to the first pose from which it sees ``object_id``."""
    from benchmark.sim.planning import interaction_poses

    world = controller.world
    poses = interaction_poses(world, agent, world.index_of[object_id])
    assert poses, f"no pose sees {object_id}"
    pose = poses[0]
    ev = controller.step(
        action="Teleport",
        position={"x": pose.i * 0.25, "y": 0.9, "z": pose.j * 0.25},
        rotation=pose.rotation,
        horizon=pose.horizon,
        agentId=agent,
    )
    assert ev.events[agent].metadata["lastActionSuccess"], ev.events[agent].metadata["errorMessage"]


def first_of(controller: Controller, object_type: str) -> str:
    return next(s.object_id for s in controller.world.specs if s.object_type == object_type)


def obj(event, object_id: str) -> dict:
    return next(o for o in event.metadata["objects"] if o["objectId"] == object_id)


def pytest_configure(config: pytest.Config) -> None:
    # Tests that need Ray start their own local instance, one per test process (pytest-xdist
    # worker); none may join a cluster named in the environment, which workers would share.
    os.environ.pop("RAY_ADDRESS", None)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A real PostgreSQL cluster of this test process (one per pytest-xdist worker), started
    in a temporary directory and removed at the end; a machine without PostgreSQL fails."""
    try:
        bin_dir = find_pg_bin()
    except FileNotFoundError as err:
        pytest.fail(str(err))
    cluster = PostgresCluster(bin_dir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres: PostgresCluster) -> str:
    """The URL of this test session's database on the cluster."""
    return postgres.create_database(f"session_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama with a byte-level BPE tokenizer trained on the benchmark's own text."""
    from benchmark.llm.tiny import save_tiny_llama, train_tokenizer
    from benchmark.tasks.spec import task_registry

    corpus = [t.instructions[level] for t in task_registry().values() for level in t.instructions]
    corpus += [
        "navigate pickup put open close toggle_on toggle_off slice explore wait done",
        "say all agent_0 agent_1",
    ]
    fast = train_tokenizer(corpus, vocab_size=400)
    out = tmp_path_factory.mktemp("tiny")
    save_tiny_llama(out, fast)
    return out


@pytest.fixture(scope="session")
def llm_pool():
    """The test session's LLM backends, each loaded once (as a worker holds them)."""
    from benchmark.llm.resources import LLMPool

    return LLMPool()


def check_containment(meta: dict) -> None:
    """Assert that containment reads the same both ways in one agent's metadata: an object's
    receptacles list it, and a receptacle's contents list it among their receptacles."""
    by_id = {o["objectId"]: o for o in meta["objects"]}
    for o in meta["objects"]:
        for p in o["parentReceptacles"] or ():
            assert o["objectId"] in by_id[p]["receptacleObjectIds"]
        for r in o["receptacleObjectIds"] or ():
            assert o["objectId"] in by_id[r]["parentReceptacles"]
