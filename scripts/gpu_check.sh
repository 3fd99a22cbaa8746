#!/usr/bin/env bash
# GPU check: the in-process vLLM backend with SmolLM2 (from its safetensors copy) on a small suite.
# Prints generated tokens/s at batch 1, 8 and 64, then the suite's results. Needs a CUDA GPU.
#
# vLLM pins its own CUDA build of torch, so this uses a separate environment (.venv-gpu) with
# vLLM installed first and the benchmark on top of it without re-resolving torch.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x .venv-gpu/bin/python ]; then
  "$PYTHON" -m venv .venv-gpu
  .venv-gpu/bin/pip install -q "vllm==0.33.0"
  .venv-gpu/bin/pip install -q --no-deps -e .
  .venv-gpu/bin/pip install -q numpy pyyaml pillow "hydra-core==1.3.2" "omegaconf==2.3.0" \
    "gymnasium==1.2.2" "pettingzoo==1.25.0" "ray==2.60.0" "rich==15.0.0" "scipy==1.17.1" \
    "transformers" "gguf==0.19.0" "accelerate" "openai" "fastapi" "uvicorn" "httpx" wandb tensorboard
fi
PY=.venv-gpu/bin/python
$PY -m benchmark.assets
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
