# Sourced by the GPU scripts: the .venv-gpu environment. vLLM pins its own CUDA build of torch
# and its transformers, so it goes in first and the benchmark on top without re-resolving torch.
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x .venv-gpu/bin/python ]; then
  "$PYTHON" -m venv .venv-gpu
  .venv-gpu/bin/pip install -q "vllm==0.33.0"
  .venv-gpu/bin/pip install -q --no-deps -e .
  .venv-gpu/bin/pip install -q numpy pyyaml pillow "hydra-core==1.3.2" "omegaconf==2.3.0" \
    "gymnasium==1.2.2" "pettingzoo==1.25.0" "ray==2.60.0" "rich==15.0.0" "scipy==1.17.1" \
    "transformers" "gguf==0.19.0" "accelerate" "openai" "fastapi" "uvicorn" "httpx" "peft" \
    wandb tensorboard
fi
PY=.venv-gpu/bin/python
