"""Play several episodes at once and send all their pending LLM calls in one batched call.

:func:`run_batched` runs K callables (one episode each) in K threads and hands each its
:class:`BatchSeat`; the team of that episode receives the seat with its LLM resources
(:class:`~benchmark.llm.resources.LLMResources`) and calls the LLM the seat gives it, a
:class:`BatchedLLM`: its ``generate`` waits until every episode still running has a call pending
(or has finished), then the last one to arrive sends all the pending chats to the real backend in
one ``generate`` and hands each episode its own generations. So a decision round of K episodes x
n agents is one batch instead of K.

Only one thread computes at a time (the others wait for their replies), so the episodes play
exactly as they would one after another: the batch a call joins depends only on the episodes'
own sequences of calls, never on timing. Under greedy decoding the generated tokens are the
backend's for each chat alone (rows of a batch do not see each other). Sampled, a backend that
seeds each row on its own (``per_row_seeds``: the ``hf`` backend) draws each chat with the seed
it has in its own call (:meth:`~benchmark.llm.base.Sampling.row_seeds`), so the sampled text is
also K=1's; elsewhere calls batch only when their sampling,
seed included, is the same, and such a batch draws from one generator.

Each episode's :class:`BatchedLLM` keeps its own :class:`~benchmark.llm.base.Usage` (its own
tokens and calls, and the latency of the batches it took part in), so per-episode accounting
stays per episode.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from benchmark.llm.base import LLM, Chat, Generation, Sampling, Usage

T = TypeVar("T")


@dataclass
class _Call:
    chats: list[Chat]
    sampling: Sampling
    extra: dict[str, list[Any]]  # per-chat arguments of the backend (one value per chat)
    done: threading.Event = field(default_factory=threading.Event)
    result: list[Generation] | None = None
    error: BaseException | None = None


class _Rendezvous:
    """Where the episodes' calls meet: flushed once every running episode waits."""

    def __init__(self, episodes: int) -> None:
        self.llm: LLM | None = None  # the backend, bound by the first episode that asks
        self.running = episodes
        self.pending: dict[int, _Call] = {}  # episode index -> its waiting call
        self.lock = threading.Lock()
        self.batches = 0
        self.batch_sizes: list[int] = []

    def call(self, episode: int, call: _Call) -> list[Generation]:
        with self.lock:
            self.pending[episode] = call
            batch = self._take_if_full()
        if batch:
            self._flush(batch)
        call.done.wait()
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result

    def finished(self) -> None:
        """An episode ended: the others may no longer wait for it."""
        with self.lock:
            self.running -= 1
            batch = self._take_if_full()
        if batch:
            self._flush(batch)

    def _take_if_full(self) -> list[_Call]:
        if not self.pending or len(self.pending) < self.running:
            return []
        calls = [self.pending[k] for k in sorted(self.pending)]
        self.pending.clear()
        return calls

    def _flush(self, calls: list[_Call]) -> None:
        # Calls that can share one backend call: same sampling and the same extra arguments. A
        # backend that seeds each row on its own (``per_row_seeds``) takes calls that differ
        # only in their seed together, each chat with its call's seed.
        per_row = bool(getattr(self.llm, "per_row_seeds", False))
        groups: dict[tuple, list[_Call]] = {}
        for call in calls:
            sampling = replace(call.sampling, seed=0) if per_row else call.sampling
            key = (sampling, tuple(sorted(call.extra)))
            groups.setdefault(key, []).append(call)
        for group in groups.values():
            chats = [chat for call in group for chat in call.chats]
            extra = {
                name: [value for call in group for value in call.extra[name]]
                for name in group[0].extra
            }
            if per_row:
                extra["seeds"] = [
                    s for call in group for s in call.sampling.row_seeds(len(call.chats))
                ]
            self.batches += 1
            self.batch_sizes.append(len(chats))
            try:
                out = self.llm.generate(chats, group[0].sampling, **extra)
            # The error belongs to the episodes of this batch: each of them raises it.
            except BaseException as err:
                for call in group:
                    call.error = err
                    call.done.set()
                continue
            start = 0
            for call in group:
                call.result = out[start : start + len(call.chats)]
                start += len(call.chats)
                call.done.set()


class BatchedLLM:
    """One episode's view of the shared backend (see the module docstring)."""

    def __init__(self, rendezvous: _Rendezvous, episode: int) -> None:
        assert rendezvous.llm is not None
        self._rendezvous = rendezvous
        self._llm: LLM = rendezvous.llm
        self._episode = episode
        self.name = self._llm.name
        self.usage = Usage()

    @property
    def backend(self) -> LLM:
        """The backend this episode shares with the others of its batch."""
        return self._llm

    def generate(self, chats: list[Chat], sampling: Sampling, **extra: Any) -> list[Generation]:
        """Join the next batch of the episodes' calls. ``extra``: per-chat arguments of the
        backend (lists as long as ``chats``), passed through."""
        if not chats:
            return []
        for name, values in extra.items():
            if not isinstance(values, list) or len(values) != len(chats):
                raise ValueError(f"{name}: expected a list of one value per chat")
        before = self._llm.usage.snapshot()["latency_ms"]
        out = self._rendezvous.call(self._episode, _Call(list(chats), sampling, dict(extra)))
        after = self._llm.usage.snapshot()["latency_ms"]
        self.usage.add(out, max(0.0, after - before))
        return out

    def score(self, prompt: Chat, candidates: list[str]) -> list[float]:
        """Scoring is not batched across episodes (the planner calls it once per episode)."""
        return self._llm.score(prompt, candidates)

    def __getattr__(self, name: str) -> Any:
        # Anything else a team reads of its backend (tokenizer, ...) is the real backend's.
        return getattr(self._llm, name)


class BatchSeat:
    """One episode's place in a batch of episodes played at once (:func:`run_batched` hands it
    to the episode): :meth:`share` turns the worker's backend into this episode's share of
    the batch."""

    def __init__(self, rendezvous: _Rendezvous, episode: int) -> None:
        self._rendezvous = rendezvous
        self.episode = episode

    def share(self, llm: LLM) -> BatchedLLM:
        """This episode's :class:`BatchedLLM` over ``llm``. The episodes of one batch share one
        backend: the first to ask names it, and any other backend is a ValueError."""
        rendezvous = self._rendezvous
        with rendezvous.lock:
            if rendezvous.llm is None:
                rendezvous.llm = llm
            elif rendezvous.llm is not llm:
                raise ValueError(
                    f"episodes batched together must share one LLM; got {llm.name!r} beside "
                    f"{rendezvous.llm.name!r}"
                )
        return BatchedLLM(rendezvous, self.episode)


@dataclass(frozen=True)
class BatchStats:
    """How the calls were batched: backend calls and the chats in each."""

    batches: int
    batch_sizes: tuple[int, ...]


def run_batched(
    episodes: Sequence[Callable[[BatchSeat], T]],
) -> tuple[list[T | BaseException], BatchStats]:
    """Run the episodes at once (one thread each), each called with its :class:`BatchSeat`, so
    that the LLM calls of the teams given their seats are batched; each episode's result, or
    the exception it raised, in order."""
    rendezvous = _Rendezvous(len(episodes))
    results: list[Any] = [None] * len(episodes)

    def play(k: int) -> None:
        try:
            results[k] = episodes[k](BatchSeat(rendezvous, k))
        except BaseException as err:  # one episode's failure is its own result
            results[k] = err
        finally:
            rendezvous.finished()

    threads = [threading.Thread(target=play, args=(k,), daemon=True) for k in range(len(episodes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, BatchStats(rendezvous.batches, tuple(rendezvous.batch_sizes))
