#!/usr/bin/env bash
# The llama.cpp row of the README's compatibility table and the smoke figures beside it: starts
# llama.cpp's OpenAI-compatible server (.venv-llamacpp, made by scripts/llamacpp_env.sh) on the
# embedded SmolLM2 GGUF file, runs the compatibility probe (python -m benchmark.llm.compat)
# against it, plays the smoke suite's tasks with baseline=llm_agents llm=openai pointed at it,
# prints the episodes' decisions/s, parse failures and fallbacks, and stops the server.
# Requests queue at the server (it decodes one at a time), so the backend's timeout is raised
# from openai.yaml's 60 s: on a busy machine a request waited longer than that.
#
#   bash scripts/llamacpp_smoke.sh               # each smoke task cut to 10 decisions per agent
#   DECISIONS=0 bash scripts/llamacpp_smoke.sh   # suite=smoke as it is (120 decisions per agent)
#
# Environment: PORT (default 8001), THREADS (llama.cpp's threads, default 1), DECISIONS (default
# 10; 0: no cut), WORKERS (Ray workers, default 2), TIMEOUT (seconds per request, default 300),
# OUT (default outputs/llamacpp_smoke; a run directory that already holds episodes resumes and
# plays its error rows again), PYTHON (the benchmark's, default .venv's).
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-8001}
THREADS=${THREADS:-1}
DECISIONS=${DECISIONS:-10}
WORKERS=${WORKERS:-2}
TIMEOUT=${TIMEOUT:-300}
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

# The decisions of the episodes in the run directory (its rows' LLM calls: one per decision).
calls() {
  "$PY" -c 'import json, sys; print(sum(json.loads(l).get("llm/calls", 0) for l in open(sys.argv[1])))' \
    "$OUT/run/episodes.jsonl" 2>/dev/null || echo 0
}
before=$(calls)
echo "llamacpp_smoke: smoke (DECISIONS=$DECISIONS) with llm=openai against $URL"
start=$(date +%s)
"$PY" -m benchmark.run baseline=llm_agents llm=openai llm.model=smollm2 \
  "llm.options.base_url=$URL" "llm.options.timeout=$TIMEOUT" "${SUITE[@]}" reference=false \
  "workers=$WORKERS" retry_errors=true "output_dir=$OUT/run" hydra.run.dir="$OUT/hydra"
seconds=$(( $(date +%s) - start ))

"$PY" - "$OUT/run/episodes.jsonl" "$seconds" "$(( $(calls) - before ))" <<'PY' | tee -a "$OUT/figures.txt"
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1])]
seconds, played = int(sys.argv[2]), int(sys.argv[3])
calls = sum(r.get("llm/calls", 0) for r in rows)


def count(key: str) -> int:
    return round(sum(r.get(key, 0.0) * r.get("llm/calls", 0) for r in rows))


print(
    f"this run: {played} decisions in {seconds} s ({played / max(seconds, 1):.3f} decisions/s); "
    f"the run directory: {len(rows)} episode rows "
    f"({sum(r.get('status') == 'error' for r in rows)} errors), {calls} decisions, "
    f"parse failures {count('llm/parse_fail_rate')}, fallbacks {count('llm/fallback_rate')}, "
    f"truncated {count('llm/truncated_rate')}, generated tokens "
    f"{sum(r.get('llm/tokens_out', 0) for r in rows)}"
)
PY
