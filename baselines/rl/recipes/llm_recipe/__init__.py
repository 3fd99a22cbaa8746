"""Train the embedded SmolLM2 for the LLM baselines on CPU, and report it. Resumable: run it
again after an interruption and it goes on from the last stage (and step) it finished.

    python -m baselines.rl.recipes.llm_recipe                    # or: make train-llm
    python -m baselines.rl.recipes.llm_recipe --only llm_agents --stages sft accuracy

``llm_agents`` learns from the ``heuristic`` team, in its ``llm_agents_v4`` prompt (the agent's
memory), on the tasks of three families (transport, switch-off, search; ``FAMILY_TASKS``),
training-split scenes:

1. ``sft``: ``python -m baselines.sft format=llm_agents lora=true ...`` on the teacher's
   decisions in the episodes it solved, a quarter of the routine ones (``explore``, ``wait``)
   kept: the adapter ``smollm2-agents-v4-sft``;
2. ``dagger`` (rounds): ``python -m baselines.rl.recipes.dagger`` plays the learner and labels the
   states it reaches with the teacher's decisions, then ``baselines.sft demos_file=...
   init_adapter=<previous>`` trains on those with half as many earlier demonstrations: the adapter
   ``smollm2-agents-v4-dagger``;
3. ``accuracy``: after each of them, ``python -m baselines.rl.recipes.imitation`` (accuracy by skill
   on held-out teacher decisions, val-split scenes);
4. ``grpo``: ``python -m baselines.train trainer=grpo rollout.team=llm_agents ...`` from the
   last adapter (reward sharing alpha 0.7, groups by episode seed, the KL guard on: KL to the
   start adapter per update, held-out TR every ``--guard-every`` updates on val-split scenes
   with seeds of their own): ``smollm2-agents-v4-grpo``;
5. ``tiny``: the from-scratch tiny policy team trained by SFT on the same teacher episodes
   (does pretraining help?);
6. ``eval``: ``python -m benchmark.run baseline=llm_agents llm=smollm2 suite=<--suite>`` per
   model (greedy), the teacher, the tiny team and the last model with messages off, all on the
   same held-out val-scene episodes; then ``python -m benchmark.compare`` for each question
   (``COMPARISONS``: paired SR differences with exact McNemar p-values).

``llm_planner`` learns the ``oracle``'s plans (``sft``), then ``grpo`` and ``eval``.

Each finished stage's adapter is copied to ``baselines/adapters/<prefix>-<stage>`` (what
``llm.adapter=<name>`` loads; ``<prefix>``: ``smollm2-agents-v4`` or ``smollm2-planner``;
``<stage>``: sft, dagger, grpo; GRPO's with its log, ``training.jsonl``), the
report (``REPORT.md``: the stages' wall times, imitation accuracies and the comparison table
with exact 95% intervals on SR) to ``baselines/adapters/`` and ``--out``. Each stage's wall
time is added up over the invocations in ``--out/timing.json``, so a run interrupted and
resumed still reports what it took in all. Every stage is a
public command line whose run directory is kept under ``--out``; a stage whose output is there
is not run again.

The modules: ``common`` (tasks, names, how a stage runs), ``stages``, ``evaluation``,
``publish``, ``report`` and ``cli`` (the command line).
"""

from __future__ import annotations

from baselines.rl.recipes.llm_recipe.cli import main, parse_args

__all__ = ["main", "parse_args"]
