#!/usr/bin/env bash
# Train an LLM team on CollabBench with verl (baselines/verl): GRPO by default, PPO with a critic
# with RECIPE=collab_bench_ppo. Builds or reuses .venv-verl with verl[vllm] (scripts/verl_env.sh),
# writes the data (python -m baselines.verl.make_data), then runs python -m baselines.verl.train.
# Arguments are extra Hydra overrides, passed on last (any key of verl's ppo_trainer config).
#
#   bash scripts/verl_train.sh                                  # 1 GPU
#   GPUS=8 bash scripts/verl_train.sh                           # 8 GPUs of one node
#   GPUS=8 bash scripts/verl_train.sh trainer.total_training_steps=200 trainer.logger=[console,wandb]
#
# Several nodes (NNODES=N, GPUS per node). Start a Ray cluster first, then run this script on the
# head node only; it connects to the cluster (ray_init.address=auto) and verl spreads its workers:
#   head node:    ray start --head --port=6379 --num-gpus=8
#   other nodes:  ray start --address=HEAD_IP:6379 --num-gpus=8
#   head node:    NNODES=2 GPUS=8 bash scripts/verl_train.sh
# Every node needs this checkout at the same path with its own .venv-verl
# (VERL_EXTRA=vllm bash scripts/verl_env.sh) and scene cache (python -m benchmark.sim.scene_cache),
# and MODEL, DATA and OUT on a filesystem all nodes see (verl's workers read the model and write
# checkpoint shards on their own nodes; the data is read wherever verl's driver actor runs).
#
# Environment (defaults in brackets):
#   MODEL       HF model directory [SmolLM2-135M-Instruct, converted from the embedded GGUF]
#   RECIPE      collab_bench_grpo | collab_bench_ppo [collab_bench_grpo]
#   TASKS       task ids or task files, comma-separated [transport_apple_fridge_v0]
#   N_AGENTS    team sizes, comma-separated [2]
#   TRAIN_SEEDS, VAL_SEEDS   episode seeds, 'start:end' or 'a,b' [0:256, 0:32]
#   BATCH       dataset rows (agent rows) per step, a multiple of every team size [32]
#   MINI_BATCH  rows per PPO mini-batch [BATCH/2]
#   ROLLOUT_N   rollouts per row, the GRPO group size [recipe: 8 for GRPO, 1 for PPO]
#   LR          the policy's learning rate [recipe: 1e-6]
#   KL_COEF     weight of the KL-to-reference loss [recipe: 0.001]
#   GPUS        GPUs per node [1];  NNODES  nodes [1]
#   DATA        where the parquet files go [data/collab_bench]
#   OUT         checkpoints and tensorboard logs [outputs/verl/$RECIPE]
#   VERL_EXTRA  the engine extra of verl [vllm]
set -euo pipefail
cd "$(dirname "$0")/.."

RECIPE=${RECIPE:-collab_bench_grpo}
TASKS=${TASKS:-transport_apple_fridge_v0}
N_AGENTS=${N_AGENTS:-2}
TRAIN_SEEDS=${TRAIN_SEEDS:-0:256}
VAL_SEEDS=${VAL_SEEDS:-0:32}
BATCH=${BATCH:-32}
MINI_BATCH=${MINI_BATCH:-$((BATCH / 2))}
GPUS=${GPUS:-1}
NNODES=${NNODES:-1}
DATA=${DATA:-data/collab_bench}
OUT=${OUT:-outputs/verl/$RECIPE}

case "$RECIPE" in
  collab_bench_grpo | collab_bench_ppo) ;;
  *) echo "verl_train: RECIPE=$RECIPE is not one of collab_bench_grpo, collab_bench_ppo" >&2; exit 2 ;;
esac

absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
DATA=$(absolute "$DATA")
OUT=$(absolute "$OUT")

VERL_EXTRA=${VERL_EXTRA:-vllm} bash scripts/verl_env.sh
PY=.venv-verl/bin/python
$PY -m benchmark.sim.scene_cache
MODEL=${MODEL:-$($PY -c "from benchmark.llm.smollm2 import smollm2_dir; print(smollm2_dir())")}

$PY -m baselines.verl.make_data --out "$DATA" --tasks "$TASKS" --n-agents "$N_AGENTS" \
  --train-seeds "$TRAIN_SEEDS" --val-seeds "$VAL_SEEDS" --batch-size "$BATCH"

overrides=(
  "actor_rollout_ref.model.path=$MODEL"
  "data.train_files=$DATA/train.parquet"
  "data.val_files=$DATA/val.parquet"
  "data.train_batch_size=$BATCH"
  "actor_rollout_ref.actor.ppo_mini_batch_size=$MINI_BATCH"
  "trainer.n_gpus_per_node=$GPUS"
  "trainer.nnodes=$NNODES"
  "trainer.default_local_dir=$OUT/checkpoints"
)
# Unset: the recipe's value.
if [ -n "${ROLLOUT_N:-}" ]; then overrides+=("actor_rollout_ref.rollout.n=$ROLLOUT_N"); fi
if [ -n "${LR:-}" ]; then overrides+=("actor_rollout_ref.actor.optim.lr=$LR"); fi
if [ -n "${KL_COEF:-}" ]; then overrides+=("actor_rollout_ref.actor.kl_loss_coef=$KL_COEF"); fi
# More than one node: join the running cluster, and fail if there is none.
if [ "$NNODES" -gt 1 ]; then overrides+=("+ray_kwargs.ray_init.address=auto"); fi

export TENSORBOARD_DIR=${TENSORBOARD_DIR:-$OUT/tensorboard}
echo "verl_train: $RECIPE on $NNODES node(s) x $GPUS GPU(s), model $MODEL, data $DATA"
exec $PY -m baselines.verl.train --config-name "$RECIPE" "${overrides[@]}" "$@"
