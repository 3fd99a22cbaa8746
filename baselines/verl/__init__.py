"""CollabBench as a verl environment: the ``collab_bench`` agent loop and what it needs.

verl is imported only in this package, and it runs in its own environment, ``.venv-verl``
(``scripts/verl_env.sh``), because verl pins an older transformers than the benchmark does.

Multi-agent mapping: one dataset row per (episode, agent).
    Every agent of an episode has its own row (:mod:`.make_data`) and runs its own agent loop
    (:mod:`.agent_loop`). The loops of an episode meet in a shared environment, the hub
    (:mod:`.hub`), which is a Ray actor and acts as the per-tick barrier. Each output holds one
    agent's tokens, with ``reward_score`` set to that agent's own return r_i. verl's GRPO groups
    are the ``rollout.n`` copies of a row (they share its ``uid``), so one group is one seed and
    one agent: the RL trainer's ``group_by=agent``.

Trade-offs of this mapping, against the alternatives:

* One row per episode, with every agent's sequence in one list output, would need verl's V1
  trainer (V0 takes one output per row). Under GRPO it would also reduce an episode's agents to
  the last output's advantage (``compute_advantage_for_multi_trajectories``), which loses each
  agent's own credit. One row per agent works under V0 and V1 and keeps r_i per agent.
* The price is coupling between rows. All rows of an episode must be in one batch
  (``data.shuffle=false``, batch sizes a multiple of n_agents), and they must run at the same
  time. A missing row cannot deadlock the run: the hub's timeout fails the copy with an error
  that names the episode and the missing agents.
* One policy plays every agent (``policy_id=shared``, agent identity is in the prompt). Per-agent
  policies would need one verl actor per policy, which verl's trainer does not offer. The
  ``policy_id`` field is there so that the data need not change if that comes.
* The environment steps inside the hub, one actor per ``hub_shards``. The simulator is fast, so
  one shard keeps up with many generation servers. More shards split the episodes by key.
* Only the first segment of an agent's sequence is returned (see :mod:`.agent_loop`). A long
  episode's later decisions are played but not trained on.
"""
