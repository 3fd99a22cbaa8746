"""The ``policy`` team: a trained LLM policy plays every agent through its agent view.

    python -m benchmark.run baseline=policy baseline.checkpoint=sft-tiny
    python -m benchmark.run baseline=policy baseline.checkpoint=RUN/final_model
    python -m benchmark.run baseline=policy baseline.checkpoint=smollm2 \\
        llm.adapter=path/to/lora_adapter

Each agent reads the :class:`~baselines.rl.core.agent_view.AgentView` prompt the policy was trained
with, and its reply is mapped back to an action. The deciding agents of a step are completed in
one generate call (one per policy when the agents have their own). Every decision is recorded
at token level (prompt ids, generated ids and their logprobs, the reply, and the reward until
the agent's next decision): training rollouts (:func:`baselines.rl.core.rollout.play_episode`) keep
it, the runner reads only the token counts (:meth:`PolicyTeam.metrics`).

Sampling is seeded per episode and per step: the k-th step of an episode (counting from 0)
samples with seed ``episode_seed * 1_000_003 + k``. Training rollouts give the episode seed;
elsewhere it comes from the team's ``seed`` and the episode's own (``TaskInfo.seed``), so the
same episode samples the same way in any process, on any worker.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from baselines.rl.core.agent_view import AgentView
from baselines.rl.core.policy import Policy, resolve_model_dir
from benchmark.agents import Team
from benchmark.env.views import TaskInfo
from benchmark.llm.base import Sampling

MODES = ("per_step", "concat")  # per_step: a fresh prompt per decision; concat: one sequence
SEED_STRIDE = 1_000_003  # sampling seed of step k: episode_seed * SEED_STRIDE + k


class Generator(Protocol):
    """Token-level generation (the torch :class:`~baselines.rl.core.policy.Policy` or vLLM)."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def generate(
        self, prompts: list[list[int]], sampling: Sampling
    ) -> list[tuple[list[int], list[float]]]: ...

    def load_weights(self, weights: dict[str, Any]) -> None: ...


@dataclass
class Decision:
    """One agent decision. In ``concat`` mode ``prompt_ids`` is the whole agent sequence so
    far (earlier turns included) and ``segment`` numbers the agent's sequences."""

    agent: str
    turn: int
    prompt_ids: list[int]
    gen_ids: list[int]
    logprobs: list[float]
    reply: str
    action: str
    reward: float = 0.0
    segment: int = 0


def check_adapter(adapter: str | Path) -> Path:
    """The peft adapter directory ``adapter``; raises ValueError when it is not one."""
    path = Path(adapter).expanduser()
    if not (path / "adapter_config.json").is_file():
        raise ValueError(
            f"adapter={str(adapter)!r} is not a peft adapter directory (no adapter_config.json)"
        )
    return path


def load_policy(
    checkpoint: str, adapter: str | None = None, device: str = "cpu", threads: int | None = 1
) -> Policy:
    """The policy of ``checkpoint`` (see :func:`~baselines.rl.core.policy.resolve_model_dir`), with
    the peft (LoRA) adapter directory ``adapter``, if given, merged into its weights."""
    policy = Policy(resolve_model_dir(checkpoint), device=device, threads=threads)
    if adapter:
        from peft import PeftModel

        adapted = PeftModel.from_pretrained(policy.model, check_adapter(adapter))
        policy.model = adapted.merge_and_unload().eval()
    return policy


def _files(directory: Path) -> tuple[tuple[str, int, int], ...]:
    return tuple(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(directory.iterdir())
        if p.is_file()
    )


_LOADING = threading.Lock()


@functools.lru_cache(maxsize=2)
def _cached_policy(
    checkpoint: str, adapter: str | None, device: str, threads: int | None, files: tuple
) -> Policy:
    """:func:`load_policy`; ``files`` only keys the cache (see :func:`shared_policy`)."""
    return load_policy(checkpoint, adapter, device, threads)


def shared_policy(
    checkpoint: str, adapter: str | None = None, device: str = "cpu", threads: int | None = 1
) -> Policy:
    """:func:`load_policy`, loaded once per process: the runner builds a team per episode.
    Generation is stateless (seeded per call), so sharing the model changes no result; the key
    holds the files' sizes and times, so a checkpoint rewritten in place is loaded again."""
    model_dir = resolve_model_dir(checkpoint)
    files = _files(model_dir) + (_files(check_adapter(adapter)) if adapter else ())
    # The episodes of a batch build their teams in threads at once; loading a model is not
    # thread-safe (transformers builds it on the meta device), so one thread loads, the rest
    # wait for it and share it.
    with _LOADING:
        return _cached_policy(str(model_dir), adapter, device, threads, files)


def sampling_seed(team_seed: int, episode_seed: int) -> int:
    """An episode's sampling seed in [0, 2**31) from the team's seed and the episode's."""
    digest = hashlib.sha256(f"{team_seed}/{episode_seed}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % 2**31


class PolicyTeam(Team):
    """Every agent is the policy (agent identity is in its prompt).

    Args:
        checkpoint: the policy to load: a model directory (a training run's ``final_model/``),
            the name of a policy saved by ``python -m baselines.sft`` (``<cache>/policies``),
            or ``smollm2``.
        adapter: a peft (LoRA) adapter directory trained on ``checkpoint``; merged at load.
        history: past actions (with their results) a prompt repeats.
        max_objects: known objects a prompt lists.
        max_tokens: tokens generated per decision.
        temperature, top_p: sampling of the replies (temperature 0: greedy).
        mode: ``per_step`` (a fresh prompt per decision) or ``concat`` (one sequence per agent:
            its earlier prompts and replies, then the new view).
        max_context: ``concat``: an agent sequence that would grow past this many tokens
            (the reply included) starts a new segment.
        seed: derives each episode's sampling seed when ``episode_seed`` is not given.
        episode_seed: this episode's sampling seed (training rollouts give their spec's).
        device, threads: torch device and CPU threads of a loaded checkpoint.
        generators: policies already loaded, instead of ``checkpoint``: ``{"shared": g}`` or
            one per agent name (the trainer's rollout workers).
    """

    def __init__(
        self,
        checkpoint: str | None = None,
        adapter: str | None = None,
        history: int = 2,
        max_objects: int = 8,
        max_tokens: int = 12,
        temperature: float = 1.0,
        top_p: float = 1.0,
        mode: str = "per_step",
        max_context: int = 1024,
        seed: int = 0,
        episode_seed: int | None = None,
        device: str = "cpu",
        threads: int | None = 1,
        generators: Mapping[str, Generator] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode={mode!r} must be one of {list(MODES)}")
        if history < 0 or max_objects < 1 or max_context < 1:
            raise ValueError(
                f"history={history}, max_objects={max_objects}, max_context={max_context}: "
                "history must be >= 0, max_objects and max_context >= 1"
            )
        # Checks max_tokens, temperature and top_p now rather than at the first decision.
        Sampling(max_tokens=max_tokens, temperature=temperature, top_p=top_p)
        if checkpoint is None and generators is None:
            raise ValueError(
                "the policy team needs a checkpoint: "
                "baseline.checkpoint=<model directory or saved policy name>"
            )
        if checkpoint is not None and generators is not None:
            raise ValueError("give checkpoint (a policy to load) or generators, not both")
        if adapter and checkpoint is None:
            raise ValueError("adapter needs the checkpoint it was trained on")
        self.generators: dict[str, Generator] = (
            dict(generators)
            if generators is not None
            else {"shared": shared_policy(str(checkpoint), adapter, device, threads)}
        )
        self.history, self.max_objects = history, max_objects
        self.max_tokens, self.temperature, self.top_p = max_tokens, temperature, top_p
        self.mode, self.max_context = mode, max_context
        self.seed, self.episode_seed = seed, episode_seed

    def _key(self, agent: str) -> str:
        return agent if agent in self.generators else "shared"

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        missing = [a for a in agent_ids if self._key(a) not in self.generators]
        if missing:
            raise ValueError(
                f"no policy for {missing}: generators has {sorted(self.generators)}; "
                "give one per agent or a 'shared' one"
            )
        self.agents = list(agent_ids)
        self.task = task_info.task
        self.views = {
            a: AgentView(a, self.agents, task_info.instruction, self.history, self.max_objects)
            for a in self.agents
        }
        self.decisions: dict[str, list[Decision]] = {a: [] for a in self.agents}
        self.context: dict[str, list[int]] = {a: [] for a in self.agents}
        self.segment = dict.fromkeys(self.agents, 0)
        self.steps = 0
        self._seed = (
            sampling_seed(self.seed, task_info.seed)
            if self.episode_seed is None
            else self.episode_seed
        )

    def _prompt_ids(self, agent: str) -> list[int]:
        generator = self.generators[self._key(agent)]
        text = self.views[agent].prompt()
        context = self.context[agent]
        if self.mode == "per_step" or not context:
            return generator.encode(text)
        # A later turn: a newline after the previous reply, then the new view.
        ids = generator.encode("\n" + text)
        if len(context) + len(ids) + self.max_tokens > self.max_context:
            self.context[agent], self.segment[agent] = [], self.segment[agent] + 1
            return generator.encode(text)
        return context + ids

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        for a in self.agents:
            self.views[a].update(observations[a])
        deciding = [a for a in self.agents if observations[a]["needs_decision"]]
        prompts = [self._prompt_ids(a) for a in deciding]
        sampling = Sampling(
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=(self._seed * SEED_STRIDE + self.steps) % 2**63,
        )
        self.steps += 1
        generated: dict[int, tuple[list[int], list[float]]] = {}
        for key, generator in self.generators.items():
            mine = [k for k, a in enumerate(deciding) if self._key(a) == key]
            if mine:
                outs = generator.generate([prompts[k] for k in mine], sampling)
                generated.update(zip(mine, outs, strict=True))
        actions = {}
        for k, (a, ids) in enumerate(zip(deciding, prompts, strict=True)):
            gen_ids, logprobs = generated[k]
            reply = self.generators[self._key(a)].decode(gen_ids)
            actions[a] = self.views[a].to_action(reply)
            self.decisions[a].append(
                Decision(
                    a,
                    len(self.decisions[a]),
                    ids,
                    gen_ids,
                    logprobs,
                    reply,
                    actions[a],
                    0.0,
                    self.segment[a],
                )
            )
            if self.mode == "concat":
                self.context[a] = ids + gen_ids
        return actions

    def rewarded(self, rewards: dict[str, float]) -> None:
        """Adds each agent's reward to its last decision (the reward until its next one)."""
        for a, r in rewards.items():
            if self.decisions.get(a):
                self.decisions[a][-1].reward += float(r)

    def metrics(self) -> dict[str, float]:
        """``llm/calls`` (decisions), ``llm/tokens_in`` (prompt tokens, earlier turns included
        in ``concat`` mode) and ``llm/tokens_out`` (generated tokens) of the episode."""
        made = [d for ds in self.decisions.values() for d in ds]
        return {
            "llm/calls": float(len(made)),
            "llm/tokens_in": float(sum(len(d.prompt_ids) for d in made)),
            "llm/tokens_out": float(sum(len(d.gen_ids) for d in made)),
        }

    def close(self) -> None:
        """The loaded policy stays cached for the next episode in this process."""
