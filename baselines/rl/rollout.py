"""Multi-agent episodes played by a policy, recorded as token-level decisions.

Every agent of the team is the policy (agent identity is in its prompt). Each decision keeps the
prompt ids, the generated ids and their rollout logprobs exactly as the generator produced them,
and the reward the agent received until its next decision. Workers run on Ray actors (one CPU
each) or in the trainer's process; every episode's sampling is seeded from its spec, so the
result does not depend on which worker plays it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from baselines.rl.agent_view import AgentView
from benchmark.env import CollabEnv, EnvOptions
from benchmark.llm.base import Sampling
from benchmark.metrics import episode_metrics


class Generator(Protocol):
    """Token-level generation (the torch :class:`~baselines.rl.policy.Policy` or vLLM)."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...

    def generate(
        self, prompts: list[list[int]], sampling: Sampling
    ) -> list[tuple[list[int], list[float]]]: ...

    def load_weights(self, weights: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to play: ``group`` indexes the seed within the training step (rollouts of
    the same seed share it); ``gen_seed`` seeds the sampling."""

    task: str
    n_agents: int
    seed: int
    split: str
    gen_seed: int
    group: int = 0
    index: int = 0


@dataclass(frozen=True)
class RolloutOptions:
    """How episodes are played (all of it is part of the training config)."""

    mode: str = "per_step"  # per_step | concat
    history: int = 2  # past actions repeated in a per_step prompt
    max_objects: int = 8  # known objects listed in a prompt
    max_tokens: int = 12  # generated tokens per decision
    temperature: float = 1.0
    top_p: float = 1.0
    max_context: int = 1024  # concat: a longer agent sequence starts a new segment
    reward_sharing: float = 0.7  # alpha of the env reward
    comm: bool = True
    ambiguity: str = "types"

    def __post_init__(self) -> None:
        if self.mode not in ("per_step", "concat"):
            raise ValueError(f"mode={self.mode!r} must be per_step or concat")

    def env_options(self, split: str) -> EnvOptions:
        return EnvOptions(
            reward_sharing=self.reward_sharing,
            comm=self.comm,
            ambiguity=self.ambiguity,
            split=split,
        )


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


@dataclass
class EpisodeResult:
    spec: EpisodeSpec
    decisions: dict[str, list[Decision]]
    metrics: dict[str, Any]
    returns: dict[str, float]
    seconds: float
    gen_tokens: int
    trace: dict[str, Any] | None = field(default=None, repr=False)


def play_episode(
    generators: Generator | dict[str, Generator],
    spec: EpisodeSpec,
    options: RolloutOptions,
    keep_trace: bool = False,
) -> EpisodeResult:
    """Play one episode: one generator for every agent, or ``{"shared": g}``, or one per
    agent name (``policy_sharing=per_agent``)."""
    if not isinstance(generators, dict):
        generators = {"shared": generators}
    start = time.perf_counter()
    env = CollabEnv(spec.task, n_agents=spec.n_agents, options=options.env_options(spec.split))
    obs, _ = env.reset(seed=spec.seed)
    agents = list(env.possible_agents)
    views = {
        a: AgentView(a, agents, env.instruction, options.history, options.max_objects)
        for a in agents
    }
    decisions: dict[str, list[Decision]] = {a: [] for a in agents}
    context: dict[str, list[int]] = {a: [] for a in agents}
    segment = dict.fromkeys(agents, 0)
    call = 0
    infos: dict[str, Any] = {}
    while env.agents:
        for a in agents:
            views[a].update(obs[a])
        deciding = [a for a in agents if obs[a]["needs_decision"]]
        prompts = []
        for a in deciding:
            generator = generators.get(a) or generators["shared"]
            text = views[a].prompt()
            if options.mode == "concat" and context[a]:
                # A later turn: a newline after the previous reply, then the new view.
                ids = generator.encode("\n" + text)
                if len(context[a]) + len(ids) + options.max_tokens > options.max_context:
                    context[a], segment[a] = [], segment[a] + 1
                    ids = generator.encode(text)
                ids = context[a] + ids
            else:
                ids = generator.encode(text)
            prompts.append(ids)
        sampling = Sampling(
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            top_p=options.top_p,
            seed=(spec.gen_seed * 1_000_003 + call) % 2**63,
        )
        call += 1
        generated = {}
        for key, generator in generators.items():
            mine = [k for k, a in enumerate(deciding) if key in (a, "shared")]
            if mine:
                outs = generator.generate([prompts[k] for k in mine], sampling)
                generated.update(zip(mine, outs, strict=True))
        actions = {}
        for k, (a, ids) in enumerate(zip(deciding, prompts, strict=True)):
            gen, logp = generated[k]
            reply = (generators.get(a) or generators["shared"]).decode(gen)
            actions[a] = views[a].to_action(reply)
            decisions[a].append(
                Decision(a, len(decisions[a]), ids, gen, logp, reply, actions[a], 0.0, segment[a])
            )
            if options.mode == "concat":
                context[a] = ids + gen
        obs, rewards, _, _, infos = env.step(actions)
        for a, r in rewards.items():
            if decisions[a]:
                decisions[a][-1].reward += float(r)
    trace = next(iter(infos.values()))["trace"]
    returns = {a: sum(d.reward for d in ds) for a, ds in decisions.items()}
    return EpisodeResult(
        spec,
        decisions,
        episode_metrics(trace),
        returns,
        time.perf_counter() - start,
        sum(len(d.gen_ids) for ds in decisions.values() for d in ds),
        trace if keep_trace else None,
    )


class RolloutWorker:
    """Plays episodes with its own copy of the policy (a Ray actor, or in-process)."""

    def __init__(self, make_generators: dict[str, Any], options: RolloutOptions) -> None:
        self.generators: dict[str, Generator] = {k: f() for k, f in make_generators.items()}
        self.options = options

    def load_weights(self, weights: dict[str, dict[str, Any]]) -> bool:
        """``weights`` per policy key (``shared`` or an agent name)."""
        for key, w in weights.items():
            self.generators[key].load_weights(w)
        return True

    def play(
        self,
        specs: list[EpisodeSpec],
        keep_trace: bool = False,
        options: RolloutOptions | None = None,
    ) -> list[EpisodeResult]:
        return [
            play_episode(self.generators, s, options or self.options, keep_trace) for s in specs
        ]
