"""The ``llm_planner`` baseline: a central LLM decomposes the task into a subtask DAG and scripted
controllers carry it out (``team``), with its prompt templates (``prompts/``).
``baselines.llm_planner:LLMPlannerTeam`` is its registered name."""

from baselines.llm_planner.team import LLMPlannerTeam

__all__ = ["LLMPlannerTeam"]
