"""The skill every agent runs, and why skills fail.

A running :class:`Skill` issues one primitive simulator action per tick. Every failure carries
a reason: a simulator :class:`~benchmark.sim.failures.Failure`, or a :class:`SkillFailure` of
the skill layer. :func:`is_permanent` tells the reasons that cannot change, so that a team never
needs to retry such an action.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from benchmark.sim.failures import PERMANENT
from benchmark.sim.world import ActionResult, World
from benchmark.skills import is_joint


class SkillFailure(StrEnum):
    """Why a skill failed in the skill layer (simulator failures keep their own reasons)."""

    UNPARSEABLE = "unparseable"  # the text does not follow the action grammar
    BAD_RECIPIENT = "bad_recipient"  # the attached message names no other agent
    NOT_ALLOWED = "not_allowed"  # the agent's capability profile forbids the skill
    NOT_KNOWN = "not_known"  # partial observability: never seen nor told about it
    NO_VIEWPOINT = "no_viewpoint"  # no reachable pose sees the target now
    TOO_HEAVY = "too_heavy"  # a heavy object needs a joint lift, never a pickup
    NEEDS_PARTNER = "needs_partner"  # a heavy object needs a second lifter in the same tick
    STUCK = "stuck"  # other agents blocked the way for too long, or there was no way


PERMANENT_SKILL_FAILURES = frozenset(
    {
        SkillFailure.UNPARSEABLE,
        SkillFailure.BAD_RECIPIENT,
        SkillFailure.NOT_ALLOWED,
        SkillFailure.TOO_HEAVY,
    }
)


def is_permanent(reason: str) -> bool:
    """Whether the same action, by the same agent holding the same thing, must fail again."""
    return reason in PERMANENT or reason in PERMANENT_SKILL_FAILURES


@dataclass
class Skill:
    """A running skill of one agent.

    Attributes:
        name, target: the skill and its objectId (None for plain skills).
        ticks: ticks spent so far; blocked: ticks spent blocked by other agents.
        finished, success, feedback: the outcome, once finished.
        reason: why it failed (a Failure or SkillFailure value; "" unless it failed).
        other_agent: the agent involved in the failure (holding the target...), or -1.
        rejected: refused before it started; it spends one tick and fails.
        primitive: for one-tick skills, the simulator action to issue.
    """

    name: str
    target: str | None = None
    ticks: int = 0
    blocked: int = 0
    finished: bool = False
    success: bool = False
    feedback: str = ""
    reason: str = ""
    other_agent: int = -1
    rejected: bool = False
    primitive: dict | None = field(default=None, repr=False)
    delay: int = 0  # ticks to spend talking before the skill starts
    record: dict | None = field(default=None, repr=False)  # its entry in the trace

    def finish(self, success: bool, feedback: str, reason: str = "", other_agent: int = -1) -> None:
        self.finished, self.success, self.feedback = True, success, feedback
        self.reason, self.other_agent = ("", -1) if success else (str(reason), other_agent)

    def reject(self, reason: str, feedback: str) -> Skill:
        """Refuse the skill before it starts (it still spends one tick); returns itself."""
        self.rejected, self.primitive = True, None
        self.success, self.feedback, self.reason = False, feedback, str(reason)
        return self

    def next_action(self, world: World, agent: int) -> dict | None:
        """The primitive action for this tick (None: stand still)."""
        return self.primitive

    def advance(
        self,
        world: World,
        agent: int,
        result: ActionResult | None,
        lift_failure: tuple[str, str] | None = None,
    ) -> None:
        """Account for one tick: talking delays the start, a rejected skill ends after its
        tick, a joint skill (a lift) ends with the joint outcome (``lift_failure``: its reason
        and feedback),
        others look at their action's ``result``."""
        if self.delay > 0:
            self.delay -= 1
        elif self.rejected:
            self.ticks += 1
            self.finished = True
        elif is_joint(self.name):
            self.ticks += 1
            if lift_failure is not None:
                self.finish(False, lift_failure[1], lift_failure[0])
            elif result is not None and not result.success:
                self.finish(False, result.error, result.reason or "", result.other_agent)
            else:
                self.finish(True, "lifted together" if result is None else "lifted")
        else:
            self.observe(world, agent, result)

    def observe(self, world: World, agent: int, result: ActionResult | None) -> None:
        """Update after the tick; ``result`` is None when no primitive was issued."""
        self.ticks += 1
        if result is None:
            self.finish(True, "ok")
        else:
            self.finish(
                result.success,
                "ok" if result.success else result.error,
                result.reason or "",
                result.other_agent,
            )
