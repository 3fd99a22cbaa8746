#!/usr/bin/env bash
# The GPU check, made for the offline GPU machine: it installs only the wheels it carries
# (.device/wheels, from `make device-check-bundle`) into a folder on PYTHONPATH, then runs
# `python -m baselines.rl.recipes.device_check`, which prints one JSON line per part: the hf
# backend's generated tokens/s (batch 1, 8, 64; free and constrained), one GRPO update of the
# trainer on SmolLM2 with LoRA, and the policy team's training step at a larger batch.
#
#   bash scripts/device_check.sh            # on the GPU machine (CUDA required), carry .device
#   bash scripts/device_check.sh --cpu      # the dry run on CPU, smaller sizes
#
# PYTHON picks the interpreter (default python3); DEVICE_SITE where the wheels go.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
WHEELS=.device/wheels
SITE=${DEVICE_SITE:-${TMPDIR:-/tmp}/device-check-site}
if ! compgen -G "$WHEELS/*.whl" >/dev/null; then
  echo "device_check: no wheels in $WHEELS: run 'make device-check-bundle' first, and carry .device" >&2
  exit 2
fi
start=$(date +%s)
rm -rf "$SITE"
"$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
  --no-cache-dir --target "$SITE" "$WHEELS"/*.whl
echo "[device_check] installed $(ls "$WHEELS"/*.whl | wc -l) wheels in $(( $(date +%s) - start )) s" >&2
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
"$PY" -m baselines.rl.recipes.device_check "$@"
echo "[device_check] total $(( $(date +%s) - start )) s" >&2
