"""One dataset row: an (episode, agent) pair, and how rows must be laid out in batches.

A row names the episode (task, scene, seed, n_agents, scene split) and the agent whose tokens
the row's output carries. Every agent of an episode has its own row; the rows of one episode
share the episode key, and their agent loops meet in one environment (:mod:`.hub`). The fields
travel in the dataset's ``extra_info`` column (:mod:`.make_data`) and reach the agent loop as
``kwargs["extra_info"]``. Pure Python: no verl, no Ray.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

AGENT_NAME = "collab_bench"  # the verl agent loop name, and the rows' data_source
FIELDS = ("task", "scene", "seed", "n_agents", "agent", "split")


@dataclass(frozen=True)
class EpisodeRow:
    """One agent's row of one episode.

    Attributes:
        task: the registered task id (``transport_apples_v0``).
        scene: the floor plan the episode is played in (``FloorPlan1``).
        seed: the episode seed (placements, start cells).
        n_agents: the team size.
        agent: this row's agent, ``agent_0`` .. ``agent_{n-1}``.
        split: the scene split the scene was drawn from (``train``, ``val``, ``test``).
    """

    task: str
    scene: str
    seed: int
    n_agents: int
    agent: str
    split: str

    def __post_init__(self) -> None:
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"extra_info.seed={self.seed!r} must be a non-negative integer")
        if not isinstance(self.n_agents, int) or self.n_agents < 1:
            raise ValueError(f"extra_info.n_agents={self.n_agents!r} must be a positive integer")
        agents = [f"agent_{k}" for k in range(self.n_agents)]
        if self.agent not in agents:
            raise ValueError(f"extra_info.agent={self.agent!r} is not one of {agents}")

    @property
    def agent_index(self) -> int:
        return int(self.agent.removeprefix("agent_"))

    @property
    def episode_key(self) -> str:
        """What every agent row of the same episode shares: ``task/scene/seed/n_agents``."""
        return f"{self.task}/{self.scene}/{self.seed}/{self.n_agents}"

    def as_extra_info(self, index: int) -> dict[str, Any]:
        """The ``extra_info`` column of this row (``index``: the row's position in its file)."""
        return {**asdict(self), "episode_key": self.episode_key, "index": index}

    @classmethod
    def from_extra_info(cls, extra_info: Mapping[str, Any] | None) -> EpisodeRow:
        """The row from a dataset's ``extra_info``; a missing field raises ValueError naming it."""
        if not isinstance(extra_info, Mapping):
            raise ValueError(
                f"the {AGENT_NAME} agent loop needs extra_info with {list(FIELDS)} (write the data "
                f"with python -m baselines.verl.make_data), got {type(extra_info).__name__}"
            )
        missing = [f for f in FIELDS if extra_info.get(f) is None]
        if missing:
            raise ValueError(f"extra_info lacks {missing}; a {AGENT_NAME} row needs {list(FIELDS)}")
        return cls(
            task=str(extra_info["task"]),
            scene=str(extra_info["scene"]),
            seed=_integer(extra_info["seed"], "seed"),
            n_agents=_integer(extra_info["n_agents"], "n_agents"),
            agent=str(extra_info["agent"]),
            split=str(extra_info["split"]),
        )


def _integer(value: Any, name: str) -> int:
    # Parquet hands back numpy integers; a float or a string here is a malformed file.
    if hasattr(value, "item"):
        value = value.item()
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"extra_info.{name}={value!r} must be an integer")
    return value


def check_batches(rows: Sequence[EpisodeRow], batch_size: int) -> None:
    """Raise ValueError unless every batch of ``batch_size`` consecutive rows holds whole
    episodes: all agent rows of an episode together, in agent order, none cut by a batch
    boundary (the layout the hub needs with ``data.shuffle=false``)."""
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be >= 1")
    start = 0
    while start < len(rows):
        first = rows[start]
        n = first.n_agents
        block = rows[start : start + n]
        expected = [f"agent_{k}" for k in range(n)]
        if [r.agent for r in block] != expected or {r.episode_key for r in block} != {
            first.episode_key
        }:
            raise ValueError(
                f"rows {start}..{start + n - 1} are not the {n} agent rows of episode "
                f"{first.episode_key} in agent order"
            )
        if start // batch_size != (start + n - 1) // batch_size:
            raise ValueError(
                f"episode {first.episode_key} (rows {start}..{start + n - 1}) is split between "
                f"two batches of {batch_size} rows; the batch size must be a multiple of "
                f"n_agents={n} and episodes of different team sizes must fill whole batches"
            )
        start += n
