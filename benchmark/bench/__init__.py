"""Benchmarks of the benchmark's own components (``python -m benchmark.bench <name>``, ``make
bench``): the simulator and env (``env``), the runner (``run``), the LLM backends (``llm``).
Speed and memory targets are checked here, never by timed unit tests."""
