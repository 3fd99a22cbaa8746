"""Recipes over the RL core: the rl table's training (``recipe``), the embedded LLM team's
(``llm_recipe``: demonstrations ``llm_demos``, ``sft``, ``dagger``, ``imitation``, ``view_check``),
held-out evaluation and reports (``evaluate``, ``report``) and benchmarks (``bench``,
``sft_bench``)."""
