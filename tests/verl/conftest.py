"""Fixtures of the verl adapter's tests. They run in .venv-verl (``make test-verl``); in an
environment without verl (the project's .venv, ``make test``) this folder is not collected."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml


def _verl_installed() -> bool:
    """Whether the verl package is importable (this folder, ``tests/verl``, can itself be found
    as a namespace package named ``verl``, so look for one of verl's own modules)."""
    try:
        return importlib.util.find_spec("verl.trainer.ppo") is not None
    except ImportError:
        return False


if not _verl_installed():
    collect_ignore_glob = ["test_*.py"]

SHORT_TASK = "transport_apple_fridge_short_v0"


@pytest.fixture(scope="session")
def short_task(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The path of transport_apple_fridge_v0 with short limits (3 decisions per agent, 40
    ticks), so that an episode of the tiny model ends in a few decisions."""
    from benchmark.paths import TASKS_DIR

    spec = yaml.safe_load((TASKS_DIR / "transport/transport_apple_fridge_v0.yaml").read_text())
    spec.update(id=SHORT_TASK, limits={"ticks": 40, "decisions": 3})
    path = tmp_path_factory.mktemp("tasks") / f"{SHORT_TASK}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


@pytest.fixture(scope="session")
def ray_local() -> Iterator[Any]:
    """A local Ray instance of this test process (2 CPUs), shut down at the end."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="collab_bench")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def transfer_queue(ray_local: Any) -> Iterator[None]:
    """verl's TransferQueue on the test's Ray instance (one storage unit), closed at the end of
    the module."""
    import transfer_queue as tq
    from omegaconf import OmegaConf

    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield
    tq.close()


@pytest.fixture(scope="session")
def tiny_policy(tiny_model: Path) -> Any:
    """The RL trainer's torch policy on the tiny random Llama (one CPU thread)."""
    from baselines.rl.core.policy import Policy

    return Policy(tiny_model, threads=1)
