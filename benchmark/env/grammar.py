"""The action grammar agents speak, parsed into structured calls.

Skill level: ``<skill> [<objectId>] [| say <agent_k|all>: <text>]`` with the skills of
:mod:`benchmark.skills` (built in: ``navigate``, ``pickup``, ``put``, ``open``, ``close``,
``toggle_on``, ``toggle_off``, ``slice``, ``lift`` (joint), ``explore``, ``wait``, ``done``);
a skill's declaration says whether it takes an objectId. Primitive level: an AI2-THOR action
name, optionally followed by an objectId (``PickupObject Apple|-00.47|+01.15|+00.48``), or
``wait``/``done``; the same message suffix applies. Unparseable text raises
:class:`ParseError`, which the environment turns into failure feedback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from benchmark.sim.actions import ACTIONS
from benchmark.skills import is_skill, is_targeted, skill_names

_RECIPIENT = re.compile(r"^(all|agent_\d+)$")


class ParseError(ValueError):
    """Action text that does not follow the grammar."""


@dataclass(frozen=True)
class Say:
    """A message: ``to`` is ``all`` or ``agent_k``."""

    to: str
    text: str


@dataclass(frozen=True)
class Call:
    """A parsed action: ``name`` is a skill (or a THOR action at primitive level)."""

    name: str
    target: str | None
    say: Say | None


def _split_message(text: str) -> tuple[str, Say | None]:
    # objectIds contain '|': the message separator is the first '| say'.
    m = re.search(r"\|\s*say\s", text)
    if m is None:
        return text.strip(), None
    head, tail = text[: m.start()], text[m.end() :]
    to, colon, body = tail.partition(":")
    to = to.strip()
    if not colon or not _RECIPIENT.match(to):
        raise ParseError("a message must read '| say <agent_k|all>: <text>'")
    return head.strip(), Say(to, body.strip())


def parse_action(text: object, level: str = "skill") -> Call:
    """Parse one action string at ``level`` ``skill`` or ``primitive``."""
    if not isinstance(text, str):
        raise ParseError(f"an action must be text, got {type(text).__name__}")
    body, say = _split_message(text)
    if not body:
        raise ParseError("empty action")
    name, _, rest = body.partition(" ")
    target = rest.strip() or None
    if level == "primitive":
        if name in ("wait", "done"):
            return Call(name, None, say)
        if name not in ACTIONS:
            raise ParseError(f"unknown action {name!r}; use an AI2-THOR action name, wait or done")
        return Call(name, target, say)
    name = name.lower()
    if not is_skill(name):
        raise ParseError(f"unknown skill {name!r}; valid skills are {', '.join(skill_names())}")
    if is_targeted(name) and target is None:
        raise ParseError(f"'{name}' needs an objectId, e.g. '{name} Apple|-00.47|+01.15|+00.48'")
    if not is_targeted(name) and target is not None:
        raise ParseError(f"'{name}' takes no argument")
    return Call(name, target, say)
