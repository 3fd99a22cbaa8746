"""``python -m baselines.rl.recipes.llm_recipe``: the whole recipe (``make train-llm``)."""

from baselines.rl.recipes.llm_recipe.cli import main

raise SystemExit(main())
