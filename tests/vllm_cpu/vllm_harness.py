"""What the vLLM tests share: the server's command line, the short smoke suite's runner and a
few chats and schemas."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SERVED_NAME = "SmolLM2-135M-Instruct"
# Decisions per agent in the tests' copy of the smoke suite.
DECISIONS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(model_dir: Path, port: int) -> list[str]:
    """The server's command line: the CPU engine settings of the in-process backend
    (``benchmark.llm.vllm_backend``), llguidance with compact JSON."""
    return [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        str(1 << 30),
        "--max-model-len",
        "4096",
        "--structured-outputs-config",
        json.dumps({"backend": "guidance", "disable_any_whitespace": True}),
    ]


def run_smoke(out: Path, search: Path, *overrides: str) -> list[dict]:
    """Play the short smoke suite with ``llm_agents`` (one process, the six episodes batched) and
    return its result rows."""
    cmd = [
        sys.executable,
        "-m",
        "benchmark.run",
        "baseline=llm_agents",
        "suite=smoke_short",
        "reference=false",
        "workers=0",
        "batch_episodes=6",
        f"hydra.searchpath=[file://{search}]",
        f"output_dir={out}",
        "logger.console=false",
        *overrides,
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    rows = (out / "episodes.jsonl").read_text().splitlines()
    return [json.loads(r) for r in rows if r.strip()]


OBJECTS = ["Fridge", "Apple", "Cabinet_2"]
CHATS = [
    [
        {"role": "system", "content": "You are agent_0 in a kitchen. Reply with one decision."},
        {"role": "user", "content": "You hold: nothing.\nYou see: Fridge, Apple, Cabinet_2"},
    ]
] * 3


def nested(depth: int) -> dict:
    """A schema of objects nested ``depth`` levels deep (vLLM refuses more than 64)."""
    schema: dict = {"type": "object"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema
