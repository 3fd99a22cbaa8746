#!/usr/bin/env bash
# Creates .venv-llamacpp, the environment of llama.cpp's OpenAI-compatible server
# (llama-cpp-python[server]), a second server that the `openai` backend is checked against
# (tests/llamacpp, `make test-llamacpp`). It holds only the server: the benchmark and its tests
# stay in .venv and start the server as a separate process.
#
#   bash scripts/llamacpp_env.sh
#   .venv-llamacpp/bin/python -m llama_cpp.server --model <gguf> --host 127.0.0.1 --port 8001
#
# A wheel of llama-cpp-python already built into pip's wheel cache is installed as it is;
# otherwise pip builds it from source (a C++ build of 10 to 25 minutes on 2 cores).
#
# Environment: LLAMACPP_VERSION (default 0.3.36), LLAMACPP_VENV (default .venv-llamacpp),
# PYTHON (default python3.11). Idempotent: a stamp file in the venv records what was installed;
# a run with the same settings and the same script does nothing. Prints what it did and how long
# it took.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${LLAMACPP_VENV:-.venv-llamacpp}
VERSION=${LLAMACPP_VERSION:-0.3.36}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
# The server's own dependencies (llama-cpp-python's [server] extra) and the library's.
SERVER_DEPS=(uvicorn fastapi sse-starlette starlette-context pydantic-settings
  diskcache jinja2 numpy typing-extensions)

STAMP=$VENV/.llamacpp-installed
want="llama-cpp-python==$VERSION $(sha256sum "$0" | cut -c1-16)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "llamacpp_env: $VENV is up to date ($want)"
  exit 0
fi

start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  echo "llamacpp_env: creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)

cache=$("$VENV/bin/python" -m pip cache dir 2>/dev/null || echo "$HOME/.cache/pip")
wheel=$(find "$cache/wheels" -name "llama_cpp_python-$VERSION-*.whl" 2>/dev/null | sort | head -n1)
if [ -n "$wheel" ]; then
  echo "llamacpp_env: installing the cached wheel $wheel"
  "${PIP[@]}" "$wheel" "${SERVER_DEPS[@]}"
else
  echo "llamacpp_env: no cached wheel of llama-cpp-python $VERSION; building it from source"
  "${PIP[@]}" "llama-cpp-python[server]==$VERSION" "${SERVER_DEPS[@]}"
fi

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md

import llama_cpp.server.app  # noqa: F401  (fails here, not in the tests, if broken)

names = ["llama_cpp_python", "fastapi", "uvicorn", "sse-starlette", "pydantic-settings"]
print("llamacpp_env: " + ", ".join(f"{n} {md.version(n)}" for n in names))
PY
echo "$want" > "$STAMP"
echo "llamacpp_env: done in $(( $(date +%s) - start )) s"
