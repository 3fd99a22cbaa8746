"""How a heuristic agent plays: the behaviour options of the ``heuristic`` team.

The defaults are the team as it always plays; each option changes one habit, in the part of
the agent where that habit lives, so that the same scripted agent makes a family of partners
(a held-out population for cross-play, ``configs/partners/``):

* ``silent`` (:mod:`~baselines.heuristic.messages`): it never says anything: no claims, finds,
  searches, homes, deliveries or lift requests reach its teammates;
* ``chatty`` (:mod:`~baselines.heuristic.messages`): it reports every object it sees, not only
  those a goal needs, and with nothing new to say it repeats its earlier news (``found``,
  ``searched``, ``home``, ``done``), oldest first and round and round, so that once it has
  said anything it says something with every decision. Claims are not repeated beyond the
  usual renewal: a claim repeated after it gave an object up would keep teammates off it;
* ``explore_order`` (:mod:`~baselines.heuristic.acting`): the order in which it opens the
  closed containers nobody searched. ``default``: in view first, then by objectId;
  ``reversed``: in view first, then by objectId from the last; ``farthest``: in view first,
  then the one farthest from where it stands, of those in view as of the others (one it walks
  to is in view on arrival, so it opens that one or another in view, never turning back);
* ``slow`` (:mod:`~baselines.heuristic.team`): after every action other than ``wait`` it
  answers ``wait`` at its next ``slow`` decisions (it still observes, hears and talks);
* ``deaf`` (:mod:`~baselines.heuristic.team`): it ignores every message it receives: no
  teammate's claims, finds, searches, homes, deliveries or lift requests reach its memory
  (it still talks);
* ``greedy_nearest`` (:mod:`~baselines.heuristic.memory`, :mod:`~baselines.heuristic.choosing`):
  it ignores its teammates' ``claim`` messages and takes the goal object nearest to where it
  stands (by the position its objectId holds) instead of one in view first by objectId. An
  object a teammate holds (a failed pickup says so) or delivered (``done``) is still theirs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

EXPLORE_ORDERS = ("default", "reversed", "farthest")


@dataclass(frozen=True)
class Style:
    """A heuristic agent's behaviour options (see the module docstring); the defaults are the
    team's usual play. Raises ValueError naming the option for a value it does not take."""

    silent: bool = False
    chatty: bool = False
    explore_order: str = "default"
    slow: int = 0
    deaf: bool = False
    greedy_nearest: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool" and not isinstance(value, bool):
                raise ValueError(f"heuristic option {f.name}={value!r} must be true or false")
        if self.explore_order not in EXPLORE_ORDERS:
            raise ValueError(
                f"heuristic option explore_order={self.explore_order!r} must be one of "
                f"{list(EXPLORE_ORDERS)}"
            )
        if isinstance(self.slow, bool) or not isinstance(self.slow, int) or self.slow < 0:
            raise ValueError(
                f"heuristic option slow={self.slow!r} must be a whole number of waits >= 0"
            )
        if self.silent and self.chatty:
            raise ValueError("heuristic options silent and chatty exclude each other")


def metres(oid: str, pose: tuple[float, float]) -> float:
    """Metres from ``pose`` (x, z) to where ``oid`` was recorded (its objectId holds the
    position, ``Type|x|y|z``); infinite when the id holds none."""
    parts = oid.split("|")
    try:
        x, z = float(parts[1]), float(parts[3])
    except (IndexError, ValueError):
        return math.inf
    return math.hypot(x - pose[0], z - pose[1])


def first_container(
    closed: list[str], visible: set[str] | dict, pose: tuple[float, float], order: str
) -> str:
    """The closed container to search next, in the ``explore_order`` ``order``."""
    if order == "default":
        return min(closed, key=lambda o: (o not in visible, o))
    pool = [o for o in closed if o in visible] or closed
    if order == "reversed":
        return max(pool)
    return max(pool, key=lambda o: (metres(o, pose), o))
