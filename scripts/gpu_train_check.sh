#!/usr/bin/env bash
# GPU check of RL training with vLLM rollouts (baselines/rl/core/vllm_generator.py) on SmolLM2.
# 1. VLLMGenerator against the torch Policy on the same weights: greedy ids and logprobs, raw
#    logprobs of sampled tokens, and a weight sync of q/v projections only (a LoRA-like subset).
# 2. Three GRPO steps with a vLLM rollout actor; prints tokens/s and step times per step.
# Needs a CUDA GPU; exits non-zero on a failed check. Environment: scripts/gpu_env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs}
source scripts/gpu_env.sh
$PY -m benchmark.sim.scene_cache
MODEL=$($PY -c "from benchmark.llm.smollm2 import smollm2_dir; print(smollm2_dir())")
$PY - "$MODEL" <<'PYEOF'
import json, sys
import torch
from baselines.rl.core.policy import Policy
from baselines.rl.core.vllm_generator import VLLMGenerator
from benchmark.llm.base import Sampling

policy, gen = Policy(sys.argv[1], device="cuda"), VLLMGenerator(sys.argv[1])
texts = ["List three things found in a kitchen.", "You are agent_0. Where is the apple? Answer briefly."]
prompts = [gen.encode(t) for t in texts]
assert prompts == [policy.encode(t) for t in texts], "prompt ids differ from Policy.encode"
greedy = Sampling(max_tokens=24, temperature=0.0)

def compare(tag):
    ours, ref = gen.generate(prompts, greedy), policy.generate(prompts, greedy)
    diff = max(abs(a - b) for (_, la), (_, lb) in zip(ours, ref) for a, b in zip(la, lb))
    match = [o[0] for o in ours] == [r[0] for r in ref]
    print(json.dumps({"check": tag, "ids_match": match, "max_abs_logprob_diff": diff}))
    return [o[0] for o in ours], match and diff < 1e-2

before, ok = compare("greedy_vs_torch")
sampled = gen.generate(prompts, Sampling(max_tokens=24, temperature=0.7, top_p=0.9, seed=1))
raw = 0.0
for p, (ids, logp) in zip(prompts, sampled):
    seq = torch.tensor([p + ids])
    with torch.no_grad():
        scored = policy.forward(seq, torch.ones_like(seq), entropy=False).logp[0, len(p):].cpu()
    raw = max(raw, (scored - torch.tensor(logp)).abs().max().item())
print(json.dumps({"check": "sampled_logprobs_are_raw", "max_abs_diff": raw}))
ok &= raw < 1e-2
torch.manual_seed(0)
weights = {k: v + 0.3 * v.std() * torch.randn_like(v) for k, v in policy.weights().items()
           if k.endswith(("q_proj.weight", "v_proj.weight"))}
policy.load_weights(weights)
gen.load_weights(weights)
after, synced = compare("after_load_weights")
print(json.dumps({"check": "load_weights_changes_generation", "changed": after != before}))
sys.exit(0 if ok and synced and after != before else 1)
PYEOF
RUN="$OUT/gpu_train"
rm -rf "$RUN"
$PY -m baselines.train trainer=grpo policy.init=smollm2 policy.generator=vllm policy.device=cuda \
  workers=1 steps=3 data.seeds_per_step=2 data.group_size=4 eval.episodes=4 eval.every=0 \
  logger=console "hydra.run.dir=$RUN"
$PY - "$RUN/metrics.jsonl" <<'PYEOF'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
keys = ("perf/tokens_per_s", "perf/rollout_s", "perf/logprob_s", "perf/update_s", "perf/step_s",
        "charts/logprob_mismatch")
for r in rows:
    print(json.dumps({"step": r["step"], **{k: round(r[k], 4) for k in keys if k in r}}))
mismatch = [r["charts/logprob_mismatch"] for r in rows if "charts/logprob_mismatch" in r]
sys.exit(0 if len(rows) == 3 and all(m < 0.05 for m in mismatch) else 1)
PYEOF
