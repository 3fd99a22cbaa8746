#!/usr/bin/env bash
# Creates .venv-verl, the environment of the verl adapter (baselines/verl) and its tests.
#
# verl 0.9.x pins transformers<5.11 and tensordict<=0.10.0 while the benchmark pins
# transformers 5.24, so verl cannot live in .venv. As scripts/gpu_env.sh does for vLLM, verl
# and its pins go in first, the benchmark on top with --no-deps, then the benchmark's runtime
# dependencies that do not conflict (transformers, torch and tensordict stay as verl wants them).
#
#   bash scripts/verl_env.sh                  # CPU: base verl on the local CPU torch (tests)
#   VERL_EXTRA=vllm bash scripts/verl_env.sh  # GPU: verl[vllm] with its own torch/vLLM pins
#
# Environment: VERL_EXTRA (empty | vllm | sglang), VERL_VERSION (default 0.9.1),
# VERL_VENV (default .venv-verl), PYTHON (default python3.11). Idempotent: a stamp file in the
# venv records what was installed; a run with the same settings and the same pyproject.toml does
# nothing. Prints what it did and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VERL_VENV:-.venv-verl}
VERL_VERSION=${VERL_VERSION:-0.9.1}
VERL_EXTRA=${VERL_EXTRA:-}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
# The CPU build of torch the benchmark pins (a local wheel here); never let pip pick another.
CPU_TORCH=torch==2.13.0
# V1 trainer (verl's default) needs TransferQueue and exactly tensordict 0.10.0.
TQ="TransferQueue==0.1.11"
TENSORDICT="tensordict==0.10.0"
RAY="ray[default]==2.60.0"

case "$VERL_EXTRA" in
  "" | vllm | sglang) ;;
  *) echo "verl_env: VERL_EXTRA=$VERL_EXTRA is not one of '', vllm, sglang" >&2; exit 2 ;;
esac

STAMP=$VENV/.verl-installed
want="verl==$VERL_VERSION extra=${VERL_EXTRA:-none} $(sha256sum pyproject.toml "$0" | sha256sum | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "verl_env: $VENV is up to date ($want)"
  exit 0
fi

start=$(date +%s)
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
if [ ! -x "$VENV/bin/python" ]; then
  echo "verl_env: creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi

if [ -z "$VERL_EXTRA" ]; then
  echo "verl_env: installing verl==$VERL_VERSION (base) on $CPU_TORCH, $TENSORDICT, $TQ"
  "${PIP[@]}" "verl==$VERL_VERSION" "$CPU_TORCH" "transformers>=5.5.3,<5.11,!=5.6.0" \
    "$TENSORDICT" "$TQ" "$RAY" "numpy==2.4.6" pyzmq msgspec cachetools pytest pytest-asyncio
else
  echo "verl_env: installing verl[$VERL_EXTRA]==$VERL_VERSION with its own torch and engine pins"
  "${PIP[@]}" "verl[$VERL_EXTRA]==$VERL_VERSION" "$TENSORDICT" "$TQ" cachetools pytest pytest-asyncio
fi

# What verl settled on: every later command pins these so nothing re-resolves them.
TORCH_PIN="torch==$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')"
TF_PIN="transformers==$("$VENV/bin/python" -c 'import transformers; print(transformers.__version__)')"
echo "verl_env: the benchmark (--no-deps) on $TORCH_PIN, $TF_PIN (pip then reports the"
echo "verl_env: benchmark's own transformers pin as a conflict: expected, verl's pin wins here)"
"${PIP[@]}" --no-deps -e .
# The benchmark's runtime dependencies (pyproject.toml) but torch, transformers and ray (above),
# and the leaderboard's, which the shared test fixtures (tests/conftest.py) import.
"${PIP[@]}" "$TORCH_PIN" "$TF_PIN" "$TENSORDICT" "numpy==2.4.6" "pyyaml==6.0.3" "pillow==12.1.0" \
  "hydra-core==1.3.2" "omegaconf==2.3.0" "gymnasium==1.2.2" "pettingzoo==1.25.0" "rich==15.0.0" \
  "scipy==1.17.1" "gguf==0.19.0" accelerate "llguidance==1.9.1" openai fastapi uvicorn httpx peft \
  wandb tensorboard pyarrow pandas "sqlalchemy==2.1.9" "alembic==1.20.1" "psycopg==3.3.9" \
  "psycopg-binary==3.3.9" "python-multipart==0.0.34" "jinja2==3.1.6" "matplotlib==3.11.2"

"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
names = ["verl", "torch", "transformers", "tensordict", "TransferQueue", "ray", "collab-bench"]
print("verl_env: " + ", ".join(f"{n} {md.version(n)}" for n in names))
import verl.experimental.agent_loop  # noqa: F401  (fails here, not in the tests, if broken)
EOF
echo "$want" > "$STAMP"
echo "verl_env: done in $(( $(date +%s) - start )) s"
