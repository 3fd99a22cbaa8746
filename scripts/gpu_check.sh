#!/usr/bin/env bash
# GPU check: the in-process vLLM backend with SmolLM2 (from its safetensors copy) on a small suite.
# Prints generated tokens/s at batch 1, 8 and 64, then the suite's results. Needs a CUDA GPU.
# Environment: scripts/gpu_env.sh (.venv-gpu, vLLM first).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu_env.sh
$PY -m benchmark.sim.scene_cache
$PY - <<'PYEOF'
import json, time
from benchmark.llm import Sampling, make_llm
llm = make_llm("vllm")
out = {}
for batch in (1, 8, 64):
    chats = [[{"role": "user", "content": f"List three things found in a kitchen. ({k})"}] for k in range(batch)]
    llm.generate(chats[:1], Sampling(max_tokens=4))
    start = time.perf_counter()
    gens = llm.generate(chats, Sampling(max_tokens=128, temperature=1.0, seed=0))
    out[f"tokens_per_s_batch{batch}"] = round(sum(len(g.token_ids) for g in gens) / (time.perf_counter() - start), 1)
print(json.dumps({"bench": "vllm", **out}))
PYEOF
$PY -m benchmark.run baseline=llm_agents llm=vllm suite=smoke workers=0 reference=false \
  output_dir=outputs/gpu_check
cat outputs/gpu_check/summary.md
