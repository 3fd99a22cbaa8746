"""The ``oracle`` reference team: :mod:`~baselines.oracle.team` plans (who does which atom),
:mod:`~baselines.oracle.recipes` acts (the next step towards an atom), with the moving steps of
:mod:`~baselines.oracle.moving`."""

from baselines.oracle.team import OracleTeam

__all__ = ["OracleTeam"]
