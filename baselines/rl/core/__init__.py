"""The RL core, read top to bottom: the policy (``policy``, ``policy_team``, ``llm_teams``,
``agent_view``), rollouts (``rollout``, ``workers``, ``vllm_generator``), samples and
advantages (``samples``, ``algos``), the update (``update``, ``reference``, ``guard``), the
trainer loop (``trainer``, ``checkpoint``, ``history``), its config and its Hydra app
(``config``, ``checks``, ``app``)."""
