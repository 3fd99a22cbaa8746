"""The environment's options: one frozen record, validated on creation, kept in every trace."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class EnvOptions:
    """Environment options (all recorded in the trace).

    Attributes:
        action_level: ``skill`` (the skill grammar) or ``primitive`` (raw THOR actions).
        observability: ``partial`` (agents know what they have seen or were told) or ``full``.
        ambiguity: instruction phrasing: ``explicit``, ``types`` or ``implicit``.
        comm: whether messages are delivered.
        token_cap: message length cap in whitespace tokens.
        message_cost: extra ticks a message costs its sender.
        reward_sharing: alpha, the team share of each agent's reward.
        success_bonus: reward every agent gets when the checklist is complete.
        split: scene split used when the scene is chosen by seed.
        strict_agents: reject agent counts outside the task's range.
        challenge: the id of the leaderboard challenge the episode answers (recorded in the
            trace; no effect on play).
    """

    action_level: str = "skill"
    observability: str = "partial"
    ambiguity: str = "types"
    comm: bool = True
    token_cap: int = 32
    message_cost: int = 0
    reward_sharing: float = 0.7
    success_bonus: float = 1.0
    split: str | None = None
    strict_agents: bool = True
    challenge: str | None = None

    def __post_init__(self) -> None:
        choices = {
            "action_level": ("skill", "primitive"),
            "observability": ("partial", "full"),
            "ambiguity": ("explicit", "types", "implicit"),
        }
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {list(valid)}")
        if not 0.0 <= self.reward_sharing <= 1.0:
            raise ValueError(f"reward_sharing={self.reward_sharing} must be in [0, 1]")
        if self.token_cap < 1 or self.message_cost < 0:
            raise ValueError("token_cap must be >= 1 and message_cost >= 0")

    def updated(self, **changes: Any) -> EnvOptions:
        """A copy with ``changes``; unknown names raise ValueError listing the valid ones."""
        valid = sorted(f.name for f in fields(self))
        unknown = sorted(set(changes) - set(valid))
        if unknown:
            raise ValueError(f"unknown env option(s) {unknown}; valid options are {valid}")
        return replace(self, **changes)
