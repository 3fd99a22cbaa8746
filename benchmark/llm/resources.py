"""The LLM resources a worker lends the teams it plays.

A worker (a runner process, a Ray worker, a training rollout worker) holds one :class:`LLMPool`:
its backends, each loaded the first time a team asks for it and kept for the worker's life, so
the worker holds one copy of each model however many episodes it plays. Before an episode the
worker hands the team an :class:`LLMResources` through :meth:`benchmark.agents.Team.bind`: the
pool, and when it plays several episodes at once (:func:`benchmark.llm.batching.run_batched`),
the episode's :class:`~benchmark.llm.batching.BatchSeat`. The team takes its backend from the pool
and calls what :meth:`LLMResources.llm` makes of it: the backend itself, or in a batch the
episode's share of it, so the episodes of a batch share one model.

>>> from benchmark.llm.resources import LLMPool, LLMResources
>>> lent = LLMResources(llms=LLMPool())
>>> llm = lent.llm(lent.llms.get("smollm2"))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

from benchmark.llm import LLM, make_llm
from benchmark.llm.batching import BatchSeat


class LLMPool:
    """A worker's LLM backends: one per (backend, model, options), built by
    :func:`~benchmark.llm.make_llm` when first asked for and kept."""

    def __init__(self) -> None:
        self._llms: dict[str, LLM] = {}
        self._loading = threading.Lock()  # the episodes of a batched rollout ask at once

    def get(self, backend: str, model: str = "", **options: Any) -> LLM:
        """The backend ``make_llm(backend, model, **options)`` builds, loaded once."""
        key = json.dumps([backend, model, options], sort_keys=True, default=str)
        with self._loading:
            if key not in self._llms:
                self._llms[key] = make_llm(backend, model=model, **options)
            return self._llms[key]

    def __len__(self) -> int:
        return len(self._llms)


@dataclass(frozen=True)
class LLMResources:
    """What a worker lends the team of one episode.

    ``llms``: the worker's backends (None where the team brings its own, as a training team
    does with the policy it trains). ``batch``: the episode's seat when the worker plays several
    episodes at once, their LLM calls batched; None when it plays one at a time.
    """

    llms: LLMPool | None = None
    batch: BatchSeat | None = None

    def llm(self, backend: LLM) -> LLM:
        """The LLM a team calls: in a batch, this episode's share of ``backend`` (the episodes
        of one batch must share one backend: ValueError otherwise); else ``backend`` itself."""
        return backend if self.batch is None else self.batch.share(backend)
