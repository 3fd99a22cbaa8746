"""Natural-language messages between agents: caps, costs, delivery and the log.

A message sent at tick t is delivered in the recipient's next observation that asks it for a
decision (so an agent busy with a skill reads it when it next chooses). Text is capped at
``token_cap`` whitespace-separated tokens; longer text is truncated and flagged.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass

OBJECT_ID = re.compile(
    r"[A-Za-z]+\|[-+]?\d+\.\d+\|[-+]?\d+\.\d+\|[-+]?\d+\.\d+(?:\|[A-Za-z]+(?:_\d+)?)?"
)


def printable(text: str) -> str:
    """ASCII-only text (accents folded, other characters replaced by '?')."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return "".join(c if 32 <= ord(c) < 127 or c == "\n" else "?" for c in folded)


@dataclass(frozen=True)
class Message:
    """One logged message. ``recipients`` are agent names; ``delivered`` is False when
    communication is off."""

    tick: int
    sender: str
    to: str
    recipients: tuple[str, ...]
    text: str
    tokens: int
    truncated: bool
    delivered: bool

    def to_json(self) -> dict:
        out = asdict(self)
        out["recipients"] = list(self.recipients)
        return out


def cap_tokens(text: str, token_cap: int) -> tuple[str, int, bool]:
    """(text within the cap, tokens counted before capping, whether it was truncated)."""
    words = printable(text).split()
    if len(words) <= token_cap:
        return " ".join(words), len(words), False
    return " ".join(words[:token_cap]), len(words), True


class Postbox:
    """Holds undelivered messages per agent and the log of all of them."""

    def __init__(self, agents: list[str]) -> None:
        self.agents = agents
        self.inbox: dict[str, list[Message]] = {a: [] for a in agents}
        self.log: list[Message] = []

    def send(
        self, tick: int, sender: str, to: str, text: str, token_cap: int, enabled: bool
    ) -> Message:
        recipients = tuple(a for a in self.agents if a != sender) if to == "all" else (to,)
        body, tokens, truncated = cap_tokens(text, token_cap)
        msg = Message(tick, sender, to, recipients, body, tokens, truncated, enabled)
        self.log.append(msg)
        if enabled:
            for r in recipients:
                self.inbox[r].append(msg)
        return msg

    def recipient_problem(self, sender: str, to: str) -> str | None:
        """Why ``sender`` cannot message ``to`` (an unknown agent, or itself), if so."""
        if to == "all":
            return None
        if to == sender:
            return "could not send the message: you cannot message yourself"
        if to not in self.agents:
            return (
                f"could not send the message: no agent {to!r}; "
                f"recipients are all, {', '.join(self.agents)}"
            )
        return None

    def deliver(self, agents: list[str]) -> dict[str, list[Message]]:
        """Every agent's delivery now: the listed agents receive the messages waiting for them
        (removed from their inboxes); the others receive nothing yet."""
        out: dict[str, list[Message]] = {a: [] for a in self.agents}
        for a in agents:
            out[a], self.inbox[a] = self.inbox[a], []
        return out
