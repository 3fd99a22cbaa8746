"""The ``llm_agents`` baseline: one LLM per agent choosing skills and messages (``team``), the
agent's own memory its v4 prompt writes (``memory``), short object handles (``handles``) and its
prompt templates (``prompts/``). ``baselines.llm_agents:LLMAgentsTeam`` is its registered name."""

from baselines.llm_agents.team import LLMAgentsTeam

__all__ = ["LLMAgentsTeam"]
