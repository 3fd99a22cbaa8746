"""Fixtures of the llama.cpp server's tests (``make test-llamacpp``): llama.cpp's
OpenAI-compatible server (``llama-cpp-python[server]``, in .venv-llamacpp, made by
``scripts/llamacpp_env.sh``) serving the embedded SmolLM2 GGUF file on loopback. The tests run in
the benchmark's own environment and start the server as a process; without .venv-llamacpp they
are skipped."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER_PYTHON = ROOT / ".venv-llamacpp" / "bin" / "python"
MODEL = "smollm2"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def llamacpp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The ``/v1`` URL of a llama.cpp server serving the embedded model as ``smollm2``."""
    if not SERVER_PYTHON.is_file():
        pytest.skip(
            f"{SERVER_PYTHON.parent.parent} does not exist: llama.cpp's server is installed there "
            "by `bash scripts/llamacpp_env.sh` (`make test-llamacpp` runs it, then these tests)"
        )
    from benchmark.llm.smollm2 import smollm2_gguf

    port = _free_port()
    log = tmp_path_factory.mktemp("llamacpp") / "server.log"
    cmd = [str(SERVER_PYTHON), "-m", "llama_cpp.server", "--model", str(smollm2_gguf())]
    cmd += ["--model_alias", MODEL, "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--n_ctx", "4096", "--n_threads", "1", "--verbose", "false"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp's server exited ({proc.returncode}): {log.read_text()}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama.cpp's server did not answer in 120 s: {log.read_text()}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
