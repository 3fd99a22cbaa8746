"""The ``heuristic`` team (``team``): decentralised scripted agents that talk. Each agent is its
memory of the world and of its teammates (``memory``), its outgoing messages (``messages``), its
choice of work (``choosing``) and the steps it takes (``acting``), reading the goal language
(``goals``), carrying objects home in rearrangements (``homes``) and lifting heavy objects with a
partner (``lift``). ``baselines.heuristic:HeuristicTeam`` is its registered name."""

from baselines.heuristic.team import HeuristicAgent, HeuristicTeam

__all__ = ["HeuristicAgent", "HeuristicTeam"]
