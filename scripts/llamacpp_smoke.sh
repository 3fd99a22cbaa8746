#!/usr/bin/env bash
# The llama.cpp row of the README's compatibility table and the smoke figures beside it: starts
# llama.cpp's OpenAI-compatible server (.venv-llamacpp, made by scripts/llamacpp_env.sh) on the
# embedded SmolLM2 GGUF file, runs the compatibility probe (python -m benchmark.llm.compat)
# against it, plays the smoke suite's tasks with baseline=llm_agents llm=openai pointed at it,
# prints the episodes' decisions/s, parse failures and fallbacks, and stops the server.
#
#   bash scripts/llamacpp_smoke.sh               # each smoke task cut to 10 decisions per agent
#   DECISIONS=0 bash scripts/llamacpp_smoke.sh   # suite=smoke as it is (120 decisions per agent)
#
# Environment: PORT (default 8001), THREADS (llama.cpp's threads, default 1), DECISIONS (default
# 10; 0: no cut), WORKERS (Ray workers, default 2), OUT (default outputs/llamacpp_smoke; a run
# directory that already holds episodes resumes), PYTHON (the benchmark's, default .venv's).
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-8001}
THREADS=${THREADS:-1}
DECISIONS=${DECISIONS:-10}
WORKERS=${WORKERS:-2}
OUT=${OUT:-outputs/llamacpp_smoke}
PY=${PYTHON:-.venv/bin/python}
URL=http://127.0.0.1:$PORT/v1

if [ ! -x .venv-llamacpp/bin/python ]; then
  echo "llamacpp_smoke: .venv-llamacpp is missing; run bash scripts/llamacpp_env.sh first" >&2
  exit 2
fi
mkdir -p "$OUT"
GGUF=$("$PY" -c 'from benchmark.llm.smollm2 import smollm2_gguf; print(smollm2_gguf())')
.venv-llamacpp/bin/python -m llama_cpp.server --model "$GGUF" --model_alias smollm2 \
  --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --n_threads "$THREADS" --verbose false \
  > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "$URL/models" > /dev/null && break
  kill -0 $SERVER 2>/dev/null || { echo "llamacpp_smoke: the server exited; see $OUT/server.log" >&2; exit 1; }
  sleep 1
done

echo "llamacpp_smoke: probe of $URL"
"$PY" -m benchmark.llm.compat --base-url "$URL" --model smollm2 \
  --server "llama.cpp server (llama-cpp-python $(.venv-llamacpp/bin/python -c 'import llama_cpp; print(llama_cpp.__version__)'))" \
  | tee "$OUT/compat.txt"

SUITE=(suite=smoke)
if [ "$DECISIONS" != 0 ]; then
  # The smoke suite's tasks, each written to a task file with the decision limit cut.
  ENTRIES=$("$PY" - "$OUT/tasks" "$DECISIONS" <<'PY'
import sys
from pathlib import Path

import yaml

from benchmark.paths import CONFIGS_DIR
from benchmark.tasks.spec import task_registry

out, cut = Path(sys.argv[1]), int(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
suite = yaml.safe_load((CONFIGS_DIR / "suite/smoke.yaml").read_text())
entries = []
for e in suite["entries"]:
    spec = yaml.safe_load(Path(task_registry()[e["task"]].path).read_text())
    spec["id"] = e["task"].removesuffix("_v0") + f"_cut{cut}_v0"
    spec["limits"]["decisions"] = cut
    path = out / f"{spec['id']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    n, seeds = e["n_agents"], e["seeds"]
    entries.append(f"{{task:{path.resolve()},split:{e['split']},n_agents:{n},seeds:{seeds}}}")
print("[" + ",".join(entries) + "]")
PY
)
  SUITE=(suite=smoke "suite.name=smoke_cut$DECISIONS" "suite.entries=$ENTRIES")
fi

echo "llamacpp_smoke: smoke (DECISIONS=$DECISIONS) with llm=openai against $URL"
start=$(date +%s)
"$PY" -m benchmark.run baseline=llm_agents llm=openai llm.model=smollm2 \
  "llm.options.base_url=$URL" "${SUITE[@]}" reference=false "workers=$WORKERS" \
  "output_dir=$OUT/run" hydra.run.dir="$OUT/hydra"
seconds=$(( $(date +%s) - start ))

"$PY" - "$OUT/run/episodes.jsonl" "$seconds" <<'PY' | tee "$OUT/figures.txt"
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
calls = sum(r.get("llm/calls", 0) for r in rows)
def count(key: str) -> int:
    return round(sum(r.get(key, 0.0) * r.get("llm/calls", 0) for r in rows))
out = sum(r.get("llm/tokens_out", 0) for r in rows)
print(
    f"{len(rows)} episodes, {calls} decisions in {sys.argv[2]} s "
    f"({calls / max(int(sys.argv[2]), 1):.2f} decisions/s, whole run), "
    f"parse failures {count('llm/parse_fail_rate')}, fallbacks {count('llm/fallback_rate')}, "
    f"truncated {count('llm/truncated_rate')}, generated tokens {out}, "
    f"error rows {sum(r.get('status') == 'error' for r in rows)}"
)
PY
