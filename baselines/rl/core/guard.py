"""The KL guard of the RL trainers: when to roll back to the last checkpoint that passed.

The decision logic alone, plain Python (no torch), so that any trainer can use it. After each
update the trainer reports the measured KL of its policy to the reference policy
(:meth:`KLGuard.check_step`), after each held-out evaluation the collaboration index
(:meth:`KLGuard.check_eval`): here the task rate TR, ``eval/task/TR``, the fraction of the
task's checklist atoms satisfied at the end (``benchmark/metrics/specs.py``). The guard answers
with a :class:`Decision`:

- ``pass``: the KL is at most ``max_kl`` and the index has not dropped by more than
  ``max_index_drop`` below the reference evaluation (the best passing one, or the last);
- ``rollback``: restore the last checkpoint that passed and go on with the learning rate
  multiplied by ``lr_factor``;
- ``stop``: restore it and stop training, because ``max_rollbacks`` rollbacks are spent (or no
  checkpoint has passed yet, so there is nothing to go back to).

The caller restores, saves and logs, and tells the guard of every checkpoint it saves
(:meth:`KLGuard.checkpoint_saved`). It saves only weights that passed every check so far, so
the last saved checkpoint is the last one that passed. The guard's bookkeeping (that step, the
reference evaluations, the rollbacks so far, the learning rate) is a plain dict
(:meth:`KLGuard.state_dict`) meant to travel inside the checkpoints, so that a resumed run keeps
its lowered learning rate and its count of rollbacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from baselines.rl.core.checks import ConfigError, at_least, in_range, one_of

INDEX_REFERENCES = ("best", "last")
INDEX_NAME = "held-out TR"  # the collaboration index, as the reasons name it


@dataclass(frozen=True)
class GuardSettings:
    enabled: bool = False  # judge updates and evaluations (off: README, the KL measured)
    max_kl: float = 0.02  # most KL(policy || reference) per generated token, in nats
    max_index_drop: float = 0.1  # most absolute drop of held-out TR below the reference eval
    index_reference: str = "best"  # best | last: the passing evaluation a drop is measured from
    lr_factor: float = 0.5  # each rollback multiplies the learning rate by this
    max_rollbacks: int = 3  # rollbacks allowed; the next failure restores and stops training

    def __post_init__(self) -> None:
        one_of(self, "index_reference", INDEX_REFERENCES)
        if not self.max_kl > 0:
            raise ConfigError("max_kl", self.max_kl, "must be > 0")
        in_range(self, "max_index_drop", 0.0, 1.0)
        if not 0 < self.lr_factor < 1:
            raise ConfigError("lr_factor", self.lr_factor, "must be in (0, 1)")
        at_least(self, 0, "max_rollbacks")


@dataclass(frozen=True)
class Decision:
    """What the guard decided at ``step`` (the number of updates done) and why.

    ``lr`` is the learning rate from now on (lowered by a rollback); ``restore_step`` the step
    of the checkpoint to restore (None when the decision passes, or stops with nothing to
    restore); ``kl`` and ``index`` the measurement judged; ``rollbacks`` the count so far."""

    step: int
    action: str
    reason: str
    lr: float
    kl: float | None = None
    index: float | None = None
    restore_step: int | None = None
    rollbacks: int = 0

    @property
    def passed(self) -> bool:
        return self.action == "pass"

    def row(self) -> dict[str, Any]:
        """The decision as a flat record (the trainer's ``kind: guard`` metrics row)."""
        return asdict(self)


class KLGuard:
    """The guard's state and decisions. ``lr`` is the learning rate training starts with."""

    def __init__(self, settings: GuardSettings, lr: float) -> None:
        self.settings = settings
        self.lr = lr
        self.good_step: int | None = None  # the last checkpoint that passed
        self.rollbacks = 0
        self.best: tuple[int, float] | None = None  # (step, index) of the best passing eval
        self.last: tuple[int, float] | None = None  # (step, index) of the last passing eval

    def check_step(self, step: int, kl: float) -> Decision:
        """Judge the KL (nats per generated token) of the policy after update ``step``."""
        limit = self.settings.max_kl
        if not kl <= limit:  # NaN fails too
            return self._fail(step, f"KL to the reference {kl:.4g} > max_kl {limit:g}", kl=kl)
        reason = f"KL to the reference {kl:.4g} <= max_kl {limit:g}"
        return Decision(step, "pass", reason, self.lr, kl=kl, rollbacks=self.rollbacks)

    def check_eval(self, step: int, index: float | None) -> Decision:
        """Judge a held-out evaluation at ``step`` by its collaboration index (a fraction);
        None (an evaluation without it) passes and is not remembered."""
        if index is None:
            reason = f"no {INDEX_NAME} to judge"
            return Decision(step, "pass", reason, self.lr, rollbacks=self.rollbacks)
        which = self.settings.index_reference
        ref = self.best if which == "best" else self.last
        margin = self.settings.max_index_drop
        if ref is not None and not ref[1] - index <= margin:
            reason = (
                f"{INDEX_NAME} {index:.3f} is {ref[1] - index:.3f} below the {which} passing "
                f"evaluation ({ref[1]:.3f} at step {ref[0]}) > max_index_drop {margin:g}"
            )
            return self._fail(step, reason, index=index)
        self.last = (step, index)
        if self.best is None or index > self.best[1]:
            self.best = (step, index)
        reason = f"{INDEX_NAME} {index:.3f}" + (
            f" within {margin:g} of the {which} passing evaluation ({ref[1]:.3f})"
            if ref is not None
            else " (the first evaluation)"
        )
        return Decision(step, "pass", reason, self.lr, index=index, rollbacks=self.rollbacks)

    def checkpoint_saved(self, step: int) -> None:
        """Record the checkpoint of ``step`` as the last that passed: the caller saves only
        weights that passed every check, or that it has just restored."""
        self.good_step = step

    def _fail(
        self, step: int, reason: str, kl: float | None = None, index: float | None = None
    ) -> Decision:
        """A failing decision: roll back while rollbacks are left, else stop."""
        good = self.good_step
        if good is None:
            reason = f"{reason}; no checkpoint has passed yet: stopping"
            return Decision(step, "stop", reason, self.lr, kl, index, None, self.rollbacks)
        limit = self.settings.max_rollbacks
        if self.rollbacks >= limit:
            reason = (
                f"{reason}; {self.rollbacks} rollbacks spent (max_rollbacks={limit}): "
                f"restoring the checkpoint of step {good} and stopping"
            )
            return Decision(step, "stop", reason, self.lr, kl, index, good, self.rollbacks)
        self.rollbacks += 1
        self.lr *= self.settings.lr_factor
        reason = (
            f"{reason}: restoring the checkpoint of step {good}, lr -> {self.lr:.3g} "
            f"(rollback {self.rollbacks} of {limit})"
        )
        return Decision(step, "rollback", reason, self.lr, kl, index, good, self.rollbacks)

    def state_dict(self) -> dict[str, Any]:
        """The bookkeeping as plain values (for a checkpoint)."""
        return {
            "lr": self.lr,
            "good_step": self.good_step,
            "rollbacks": self.rollbacks,
            "best": None if self.best is None else list(self.best),
            "last": None if self.last is None else list(self.last),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s values."""
        self.lr = float(state["lr"])
        self.good_step = state["good_step"]
        self.rollbacks = int(state["rollbacks"])
        self.best = None if state["best"] is None else (int(state["best"][0]), state["best"][1])
        self.last = None if state["last"] is None else (int(state["last"][0]), state["last"][1])
