#!/usr/bin/env bash
# GPU check of training through verl: 3 GRPO steps of the CollabBench recipe with vLLM rollouts
# on SmolLM2-135M-Instruct on one GPU (the HF folder smollm2_dir() converts from the embedded
# GGUF, as scripts/gpu_train_check.sh uses; no model hub is needed). To keep it short, the task is
# transport_apple_fridge_v0 with 8 decisions per agent and replies are capped at 96 tokens (a copy
# of agent_loops.yaml). The third step ends with a validation. Prints, per step, the step and
# generation times, tokens/s, KL and the collaboration metrics, from verl's file logger. Exits
# non-zero unless 3 steps were logged, each with the collaboration metrics of its 8 episode
# copies, and the validation's eval/* metrics.
# Needs a CUDA GPU. Environment: .venv-verl with verl[vllm] (scripts/verl_env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs}
RUN=$PWD/$OUT/gpu_verl_check
rm -rf "$RUN"
mkdir -p "$RUN"

VERL_EXTRA=vllm bash scripts/verl_env.sh
PY=.venv-verl/bin/python
$PY -m benchmark.sim.scene_cache
MODEL=$($PY -c "from benchmark.llm.smollm2 import smollm2_dir; print(smollm2_dir())")

$PY - "$RUN" <<'PYEOF'
import sys
from pathlib import Path
import yaml
from benchmark.paths import TASKS_DIR
run = Path(sys.argv[1])
task = yaml.safe_load((TASKS_DIR / "transport/transport_apple_fridge_v0.yaml").read_text())
task.update(id="transport_apple_fridge_check_v0", limits={"ticks": 80, "decisions": 8})
(run / "transport_apple_fridge_check_v0.yaml").write_text(yaml.safe_dump(task))
loops = yaml.safe_load(Path("baselines/verl/agent_loops.yaml").read_text())
loops[0]["max_tokens"] = 96
(run / "agent_loops.yaml").write_text(yaml.safe_dump(loops))
PYEOF

# 3 steps of 4 rows: 2 episodes of 2 agents each, x 4 rollouts = 8 episode copies per step.
$PY -m baselines.verl.make_data --out "$RUN/data" --tasks "$RUN/transport_apple_fridge_check_v0.yaml" \
  --n-agents 2 --train-seeds 0:6 --val-seeds 0:2 --batch-size 4

$PY -m baselines.verl.train --config-name collab_bench_grpo \
  "actor_rollout_ref.model.path=$MODEL" \
  "data.train_files=$RUN/data/train.parquet" "data.val_files=$RUN/data/val.parquet" \
  data.train_batch_size=4 data.max_prompt_length=1024 data.max_response_length=2048 \
  actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.ppo_mini_batch_size=2 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 actor_rollout_ref.rollout.agent.num_workers=2 \
  "actor_rollout_ref.rollout.agent.agent_loop_config_path=$RUN/agent_loops.yaml" \
  trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.total_training_steps=3 \
  trainer.val_before_train=false trainer.test_freq=3 trainer.save_freq=-1 \
  trainer.experiment_name=gpu_check "trainer.default_local_dir=$RUN/checkpoints" \
  "trainer.logger=[console,file]" \
  "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH=$RUN/metrics.jsonl"

$PY - "$RUN/metrics.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
keys = ("timing_s/step", "timing_s/gen", "perf/throughput", "perf/total_num_tokens",
        "response_length/mean", "actor/kl_loss", "actor/ppo_kl", "critic/score/mean",
        "charts/episodes", "task/SR", "task/TR", "task/L_decisions", "collab/B",
        "collab/redundancy", "comm/messages", "comm/messages_per_decision")
train = [r for r in rows if "charts/episodes" in r["data"]]
for r in train:
    d = r["data"]
    out = {"step": r["step"], **{k: round(float(d[k]), 4) for k in keys if k in d}}
    if "timing_s/gen" in d and "response_length/mean" in d:
        # 16 samples a step (8 copies x 2 agents); a response holds the replies and the masked
        # views between them.
        out["response_tokens_per_s_gen"] = round(16 * d["response_length/mean"] / d["timing_s/gen"], 1)
    print(json.dumps(out))
evals = [{k: v for k, v in r["data"].items() if k.startswith("eval/")} for r in rows]
evals = [e for e in evals if e]
for e in evals:
    print(json.dumps({k: round(float(v), 4) for k, v in e.items()}))
ok = len(train) == 3 and all(r["data"]["charts/episodes"] == 8 and "task/SR" in r["data"]
                             for r in train) and len(evals) == 1
sys.exit(0 if ok else 1)
PYEOF
