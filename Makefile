# One way in: `make run` and `make test` set everything up on a fresh machine (Python 3.11).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
BENCH_INSTALLED := $(VENV)/.bench-installed

.PHONY: setup assets run test lint bench rl clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch is pinned in the same install command so the local CPU wheel is used.
$(INSTALLED): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev,thor]' torch==2.13.0
	touch $@

# The bench extra (TRL, for `baselines.rl.bench`), again with torch pinned.
$(BENCH_INSTALLED): pyproject.toml | $(INSTALLED)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[dev,thor,bench]' torch==2.13.0
	touch $@

assets: $(INSTALLED)
	$(BIN)/python -m benchmark.assets

setup: assets

run: setup
	$(BIN)/python -m benchmark.run

lint: $(INSTALLED)
	$(BIN)/ruff check benchmark baselines leaderboard tests

test: setup lint
	$(BIN)/python -m pytest -q

bench: setup $(BENCH_INSTALLED)
	$(BIN)/python -m benchmark.bench sim
	$(BIN)/python -m benchmark.bench env
	$(BIN)/python -m benchmark.bench run
	$(BIN)/python -m benchmark.bench llm
	$(BIN)/python -m baselines.rl.bench

# The CPU learning recipe (about 2 hours): SFT, then GRPO, PPO and SPPO, report and curves.
rl: setup
	$(BIN)/python -m baselines.rl.recipe --out outputs/rl_recipe

clean:
	rm -rf $(VENV) outputs .pytest_cache .ruff_cache
