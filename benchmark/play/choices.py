"""What a person may choose for their agent at a decision: the valid actions and the message.

The valid actions follow the same rules as the grammar the LLM agents decode under: the
agent's skills (every skill its capability profile allows, less ``pickup`` while it holds
something and ``put`` while it holds nothing) times the objects it knows, for the targeted
skills, plus the plain skills. A message goes to ``all`` or one other agent (only when messages
are delivered) and holds at most the episode's ``token_cap`` whitespace tokens, counted as the
environment counts them (:func:`benchmark.env.messaging.cap_tokens`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from benchmark.env.messaging import cap_tokens
from benchmark.skills import is_targeted, skill_names


class FormError(ValueError):
    """A decision form that cannot be accepted; the message says what is wrong."""


class StaleForm(FormError):
    """A form posted at the wrong time: for another tick, twice, or when no decision is due."""


def seat_skills(cannot: Collection[str], holding: bool) -> list[str]:
    """The skills an agent may choose now, in the grammar's order."""
    drop = set(cannot) | ({"pickup"} if holding else {"put"})
    return [s for s in skill_names() if s not in drop]


def valid_actions(skills: Sequence[str], objects: Sequence[str]) -> list[str]:
    """Every action text of ``skills`` on ``objects`` (targeted skills) and the plain skills,
    the targeted ones first, each once."""
    actions = [f"{s} {o}" for s in skills if is_targeted(s) for o in objects]
    actions += [s for s in skills if not is_targeted(s)]
    return list(dict.fromkeys(actions))


def grouped(actions: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The actions grouped by skill, in order (a page's ``<optgroup>``s)."""
    groups: dict[str, list[str]] = {}
    for action in actions:
        groups.setdefault(action.split(" ", 1)[0], []).append(action)
    return list(groups.items())


@dataclass(frozen=True)
class Choice:
    """What a seat may post now: its valid actions, message recipients and token cap."""

    actions: tuple[str, ...]
    recipients: tuple[str, ...]
    token_cap: int

    def decision(self, form: Mapping[str, str]) -> str:
        """The action line of a posted form (``action``, ``to``, ``message``), in the grammar
        (``<action> [| say <to>: <text>]``); :class:`FormError` says what is wrong with it."""
        action = str(form.get("action") or "").strip()
        if not action:
            raise FormError("choose an action: the form had none")
        if action not in self.actions:
            raise FormError(f"{action!r} is not a valid action for your agent now")
        text = " ".join(str(form.get("message") or "").split())
        if not text:
            return action
        if not self.recipients:
            raise FormError("messages are not delivered in this episode: leave the message empty")
        to = str(form.get("to") or "all").strip()
        if to not in self.recipients:
            raise FormError(f"no recipient {to!r}: send to one of {', '.join(self.recipients)}")
        body, tokens, truncated = cap_tokens(text, self.token_cap)
        if truncated:
            raise FormError(
                f"the message has {tokens} words; the cap is {self.token_cap}: shorten it"
            )
        if body != text:
            raise FormError("the message may hold printable ASCII characters only")
        return f"{action} | say {to}: {body}"
