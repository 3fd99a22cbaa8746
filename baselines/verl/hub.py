"""The episode hub: where the agent loops of one episode meet in one environment.

verl runs one agent loop per dataset row, and the rows of an episode (one per agent) may run on
different ``AgentLoopWorker`` actors, so the environment lives in a hub that all of them call: a
Ray actor in a cluster (:func:`ray_hub`), or a plain object in one process (tests). The hub is
the per-tick barrier. Each loop calls :meth:`EpisodeHub.exchange` with its action and gets back
the observations it missed and, when it must decide, its turn. The environment steps once every
agent that must decide has answered.

Copies. verl repeats each row ``rollout.n`` times, so each agent arrives n times per episode key,
and the hub pairs the arrivals into n independent episode copies. Under verl's V1 trainer a loop
knows its ``session_id`` (0..n-1), which names its copy. Under V0 the k-th arrival of an agent
joins the first copy that lacks that agent (arrival order). Copies of one seed can be swapped
with each other, so either pairing is valid.

Failure. A loop that waits longer than ``timeout_s`` for the others raises :class:`HubError`.
The error names the episode, the copy, the tick and the missing agents: an agent that never
joined (its row was not in the batch) or one that did not answer (its loop failed). The copy is
then marked failed, so every other loop of it fails too instead of waiting. A loop that fails
on its own (a server error, say) abandons its copy (:meth:`EpisodeHub.abandon`) with the same
effect.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from typing import Any

from baselines.verl.rows import EpisodeRow
from benchmark.env import CollabEnv, EnvOptions
from benchmark.metrics.episode import episode_metrics
from benchmark.metrics.specs import at_level

# Every per-episode metric under its logger key, the same keys in every result (None -> NaN).
METRIC_KEYS = tuple(m.key for m in at_level("episode"))
MESSAGES_PER_DECISION = "comm/messages_per_decision"


class HubError(RuntimeError):
    """An episode copy that cannot go on (an agent missing, or a malformed call)."""


@dataclass
class _Copy:
    """One episode copy: its environment and where every agent stands."""

    row: EpisodeRow
    copy: int
    options: EnvOptions
    joined: set[str] = field(default_factory=set)
    env: CollabEnv | None = None
    deciding: set[str] = field(default_factory=set)
    actions: dict[str, str] = field(default_factory=dict)
    inbox: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    returns: dict[str, float] = field(default_factory=dict)
    told: set[str] = field(default_factory=set)  # agents that got the end (result or error)
    result: dict[str, Any] | None = None
    error: str | None = None
    cond: asyncio.Condition = field(default_factory=asyncio.Condition)

    @property
    def name(self) -> str:
        return f"episode {self.row.episode_key} copy {self.copy}"

    @property
    def agents(self) -> list[str]:
        return [f"agent_{k}" for k in range(self.row.n_agents)]


def episode_result(trace: dict[str, Any], returns: dict[str, float]) -> dict[str, Any]:
    """What every agent loop of a finished copy gets: each agent's return, the team reward (the
    mean of the agents' returns) and the episode's metrics under their logger keys (NaN where a
    metric is undefined for the episode), plus ``comm/messages_per_decision``."""
    raw = episode_metrics(trace)
    metrics = {}
    for key in METRIC_KEYS:
        value = raw.get(key.split("/", 1)[1])
        metrics[key] = math.nan if value is None else float(value)
    decisions = metrics["task/L_decisions"]
    metrics[MESSAGES_PER_DECISION] = metrics["comm/messages"] / decisions if decisions else 0.0
    return {
        "returns": dict(returns),
        "team_reward": sum(returns.values()) / len(returns),
        "metrics": metrics,
        "ticks": int(trace["final"]["ticks"]),
    }


class EpisodeHub:
    """Plays episode copies for the agent loops that join them.

    Args:
        timeout_s: how long a loop waits for the other agents (to join, or to answer at a tick)
            before the copy fails with a :class:`HubError` naming them (seconds).
        keep_traces: keep every finished copy's trace for :meth:`trace` (tests, debugging;
            a training run would accumulate them).
    """

    def __init__(self, timeout_s: float = 600.0, keep_traces: bool = False) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s={timeout_s} must be > 0")
        self.timeout_s = float(timeout_s)
        self.keep_traces = keep_traces
        self.traces: dict[str, dict[str, Any]] = {}
        self.copies: dict[str, _Copy] = {}
        self.open: dict[str, list[str]] = {}  # episode key -> copies still missing agents

    async def join(
        self, row: dict[str, Any], options: dict[str, Any], session: int | None = None
    ) -> str:
        """Join ``row``'s agent to a copy of its episode; returns the copy's id.

        Args:
            row: the row's fields (:class:`~baselines.verl.rows.EpisodeRow` as a dict).
            options: :class:`~benchmark.env.EnvOptions` fields of the episode (all agents of a
                copy must give the same).
            session: the copy to join (verl V1's ``session_id``); None joins by arrival order.
        """
        r = EpisodeRow(**row)
        opts = EnvOptions().updated(split=r.split, **options)
        key = r.episode_key
        if session is not None:
            cid = f"{key}#{session}"
            if cid not in self.copies:
                self._add(cid, r, int(session), opts)
        else:
            waiting = self.open.get(key, [])
            cid = next((c for c in waiting if r.agent not in self.copies[c].joined), "")
            if not cid:
                copy = max((self.copies[c].copy for c in waiting), default=-1) + 1
                while f"{key}#{copy}" in self.copies:
                    copy += 1
                cid = f"{key}#{copy}"
                self._add(cid, r, copy, opts)
        c = self.copies[cid]
        if c.options != opts:
            raise HubError(f"{c.name}: {r.agent} plays with {opts}, the copy with {c.options}")
        if r.agent in c.joined:
            raise HubError(f"{c.name}: {r.agent} joined twice")
        async with c.cond:
            c.joined.add(r.agent)
            if len(c.joined) == r.n_agents:
                self.open[key].remove(cid)
                if not self.open[key]:
                    del self.open[key]
                self._start(c)
                c.cond.notify_all()
        return cid

    def _add(self, cid: str, row: EpisodeRow, copy: int, options: EnvOptions) -> None:
        self.copies[cid] = _Copy(row, copy, options)
        self.open.setdefault(row.episode_key, []).append(cid)

    def _start(self, c: _Copy) -> None:
        r = c.row
        c.env = CollabEnv(r.task, scene=r.scene, n_agents=r.n_agents, options=c.options)
        obs, _ = c.env.reset(seed=r.seed)
        c.returns = dict.fromkeys(c.agents, 0.0)
        self._deliver(c, obs)

    def _deliver(self, c: _Copy, obs: dict[str, dict[str, Any]]) -> None:
        for agent in c.agents:
            c.inbox.setdefault(agent, []).append(obs[agent])
        c.deciding = {a for a in c.agents if obs[a]["needs_decision"]}
        c.actions = {}

    def _step(self, c: _Copy) -> None:
        assert c.env is not None
        obs, rewards, _, _, infos = c.env.step(dict(c.actions))
        for agent, r in rewards.items():
            c.returns[agent] += float(r)
        if c.env.agents:
            self._deliver(c, obs)
            return
        trace = next(iter(infos.values()))["trace"]
        c.result = episode_result(trace, c.returns)
        if self.keep_traces:
            self.traces[f"{c.row.episode_key}#{c.copy}"] = trace
        c.deciding, c.actions = set(), {}

    async def exchange(self, cid: str, agent: str, action: str | None = None) -> dict[str, Any]:
        """Hand in ``agent``'s action (None on its first call) and wait for its next turn.

        Returns ``{"observations": [...], "decide": bool, "instruction": str, "result": dict |
        None}``: the observations since the agent's last turn (the environment's dicts, in
        order), whether it must decide now, the episode's instruction, and at the end
        :func:`episode_result` (then ``decide`` is False).
        Raises :class:`HubError` after ``timeout_s`` without the others, naming them.
        """
        c = self.copies.get(cid)
        if c is None:
            raise HubError(f"no episode copy {cid!r}: join first (it may have ended)")
        if agent not in c.joined:
            raise HubError(f"{c.name}: {agent} did not join it")
        async with c.cond:
            if action is not None:
                if agent not in c.deciding or agent in c.actions:
                    raise HubError(f"{c.name}: {agent} acted when it had no decision to make")
                c.actions[agent] = action
                if c.error is None and set(c.actions) == c.deciding:
                    self._step(c)
                    c.cond.notify_all()
            try:
                async with asyncio.timeout(self.timeout_s):
                    await c.cond.wait_for(lambda: self._ready(c, agent))
            except TimeoutError:
                self._fail(c, self._missing(c))
            if c.error is not None:
                self._tell(cid, c, agent)
                raise HubError(c.error)
            turn = {
                "observations": c.inbox.pop(agent, []),
                "decide": c.result is None,
                "instruction": c.env.instruction if c.env is not None else "",
                "result": c.result,
            }
            if c.result is not None:
                self._tell(cid, c, agent)
            return turn

    async def abandon(self, cid: str, agent: str, why: str) -> None:
        """``agent``'s loop failed (``why``): fail the copy now, so that the other agents'
        loops raise at once instead of waiting out the timeout."""
        c = self.copies.get(cid)
        if c is None:
            return
        async with c.cond:
            self._fail(c, f"{agent}'s agent loop failed: {why}")
            self._tell(cid, c, agent)

    @staticmethod
    def _ready(c: _Copy, agent: str) -> bool:
        started = c.env is not None
        return (
            c.error is not None
            or c.result is not None
            or (started and agent in c.deciding and agent not in c.actions)
        )

    def _missing(self, c: _Copy) -> str:
        if c.env is None:
            absent = [a for a in c.agents if a not in c.joined]
            return (
                f"{absent} did not join within {self.timeout_s:g} s; every agent row of an "
                "episode must be in the same batch (python -m baselines.verl.make_data writes "
                "them together: use data.shuffle=false and a batch size that is a multiple of "
                "n_agents)"
            )
        tick = c.env.tick
        silent = sorted(c.deciding - set(c.actions))
        return f"no action from {silent} at tick {tick} within {self.timeout_s:g} s"

    def _fail(self, c: _Copy, why: str) -> None:
        if c.error is None:
            c.error = f"{c.name}: {why}"
            key = c.row.episode_key
            cid = f"{key}#{c.copy}"
            if cid in self.open.get(key, []):
                self.open[key].remove(cid)
                if not self.open[key]:
                    del self.open[key]
        c.cond.notify_all()

    def _tell(self, cid: str, c: _Copy, agent: str) -> None:
        """``agent`` got the end; the copy is forgotten once every agent that joined has."""
        c.told.add(agent)
        if c.told >= c.joined and self.copies.get(cid) is c:
            del self.copies[cid]

    async def pending(self) -> list[str]:
        """The copies in play or waiting for agents (ids)."""
        return sorted(self.copies)

    async def trace(self, cid: str) -> dict[str, Any]:
        """The trace of finished copy ``cid`` (with ``keep_traces``)."""
        if cid not in self.traces:
            raise HubError(f"no kept trace of {cid!r} (keep_traces={self.keep_traces})")
        return self.traces[cid]


def ray_hub(name: str = "collab_bench_hub", timeout_s: float = 600.0, **kwargs: Any) -> Any:
    """The named hub actor of this Ray job, created by the first caller (race-free; a later
    caller gets the existing actor and its arguments). It asks for no CPU so that it never
    waits for a slot the agent loop workers hold. ``kwargs``: more :class:`EpisodeHub`
    arguments."""
    import ray

    actor = ray.remote(EpisodeHub).options(
        name=name, get_if_exists=True, num_cpus=0, max_concurrency=10_000
    )
    return actor.remote(timeout_s, **kwargs)
