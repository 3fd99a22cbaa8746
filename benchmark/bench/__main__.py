"""``python -m benchmark.bench <sim|env|run|llm>`` (:mod:`benchmark.bench.cli`)."""

from benchmark.bench.cli import main

raise SystemExit(main())
