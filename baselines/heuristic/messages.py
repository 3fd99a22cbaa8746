"""What a heuristic agent tells its teammates, and the queue its messages wait in.

Its news, one message each (``NEWS``; the LLM agents' memory reads the same messages):

* ``claim <id>``: it works on the object; the others leave it alone;
* ``found <id> in <receptacleId>``: where it saw an object a goal needs (``in`` left out for
  one resting on nothing);
* ``searched <id>``: it opened that container; nobody needs to open it again;
* ``done <id>``: it delivered the object;
* ``home <id> in <receptacleId>``: where a rearrangement wants the object
  (:mod:`baselines.heuristic.homes`).

A joint lift has messages of its own (:mod:`baselines.heuristic.lift`). An agent says one
message with each decision, so the others wait in its outbox: claims and lift messages go to
the front, news to the back. A ``silent`` agent says nothing; a ``chatty`` one reports every
object it sees and repeats its earlier news when it has nothing new to say
(:mod:`baselines.heuristic.style`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

NEWS = re.compile(r"^(claim|found|searched|done|home) (\S+)(?: in (\S+))?$")


class Herald:
    """One agent's outgoing messages.

    Args:
        silent: it never says anything (what is queued is dropped).
        chatty: it reports every object it sees, and with nothing waiting repeats its earlier
            news (claims aside), oldest first, round and round.

    Attributes:
        outbox: the messages waiting to be said, the next one first (the agent's lift crew
            queues its own in it too).
        reported: the objects it has said ``found`` about (each once).
        said: a chatty agent's news said so far, the next to repeat first.
    """

    def __init__(self, silent: bool = False, chatty: bool = False) -> None:
        self.outbox: deque[str] = deque()
        self.reported: set[str] = set()
        self.silent = silent
        self.chatty = chatty
        self.said: deque[str] = deque()

    def report(self, visible: Iterable[dict[str, Any]], relevant: Callable[[str], bool]) -> None:
        """Queue ``found`` for each object in view worth telling about (``relevant``; every
        object for a chatty agent) that it has not reported yet, in the order of the
        observation."""
        for entry in visible:
            oid = entry["objectId"]
            if (self.chatty or relevant(oid)) and oid not in self.reported:
                self.reported.add(oid)
                where = f" in {entry['in']}" if entry["in"] else ""
                self.outbox.append(f"found {oid}{where}")

    def say(self, text: str) -> None:
        """Queue ``text`` after the messages waiting."""
        self.outbox.append(text)

    def say_first(self, text: str) -> None:
        """Queue ``text`` before the messages waiting (a claim)."""
        self.outbox.appendleft(text)

    def attach(self, action: str) -> str:
        """``action`` with the next message waiting, if any, said to all (nothing for a silent
        agent; an earlier piece of news again for a chatty one with nothing waiting)."""
        if self.silent:
            self.outbox.clear()
            return action
        if self.chatty:
            return self._chat(action)
        if self.outbox:
            return f"{action} | say all: {self.outbox.popleft()}"
        return action

    def _chat(self, action: str) -> str:
        """A chatty agent's ``attach``: what is waiting, else the oldest news it said again."""
        if self.outbox:
            text = self.outbox.popleft()
            if NEWS.match(text) and not text.startswith("claim "):
                self.said.append(text)
        elif self.said:
            text = self.said.popleft()
            self.said.append(text)
        else:
            return action
        return f"{action} | say all: {text}"
