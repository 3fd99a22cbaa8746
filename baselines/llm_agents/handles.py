"""Short, stable names for the objects an LLM agent knows, in place of objectIds.

An objectId (``Fridge|-02.80|+00.00|+04.43``) costs a small model about 20 tokens to read and as
many to write; a handle (``Fridge``, ``Cabinet_2``) costs two or three. An agent's first object
of a type is named by the type, later ones ``Type_2``, ``Type_3`` in the order the agent learns
of them, and a handle never changes within an episode, so the agent's history stays readable.
Every object gets its handle when the agent first sees it or reads its id in a message or in the
instruction; text going out (actions, message bodies) has handles replaced by ids again.
"""

from __future__ import annotations

import re

from benchmark.env.messaging import OBJECT_ID
from benchmark.teamkit import type_of_id

_HANDLE = re.compile(r"\b[A-Z][A-Za-z]*(?:_\d+)?\b")


class Handles:
    """One agent's handles for the objects it knows (insertion order = discovery order)."""

    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}
        self.by_handle: dict[str, str] = {}
        self._count: dict[str, int] = {}

    def learn(self, object_id: str) -> str:
        """The handle of ``object_id``, given it if new."""
        handle = self.by_id.get(object_id)
        if handle is None:
            kind = type_of_id(object_id)
            k = self._count.get(kind, 0) + 1
            self._count[kind] = k
            handle = kind if k == 1 else f"{kind}_{k}"
            self.by_id[object_id] = handle
            self.by_handle[handle] = object_id
        return handle

    def learn_in(self, text: str) -> None:
        """Gives a handle to every objectId in ``text``."""
        for oid in OBJECT_ID.findall(text):
            self.learn(oid)

    def handles(self) -> list[str]:
        """Every handle, in discovery order."""
        return list(self.by_handle)

    def shorten(self, text: str) -> str:
        """``text`` with known objectIds written as handles (unknown ids stay as they are)."""
        return OBJECT_ID.sub(lambda m: self.by_id.get(m.group(0), m.group(0)), text)

    def expand(self, text: str) -> str:
        """``text`` with handles written as objectIds (other words stay as they are)."""
        return _HANDLE.sub(lambda m: self.by_handle.get(m.group(0), m.group(0)), text)
