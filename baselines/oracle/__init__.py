"""The ``oracle`` reference team: :mod:`~baselines.oracle.team` plans (who does which atom),
:mod:`~baselines.oracle.recipes` acts (the next step towards an atom)."""

from baselines.oracle.team import OracleTeam

__all__ = ["OracleTeam"]
