"""Multi-agent episodes played by a policy, recorded as token-level decisions.

An episode is :func:`benchmark.rollout.run_episode` with a
:class:`~baselines.rl.core.policy_team.PolicyTeam` on the worker's generators: the same team and
the same loop as an evaluation through ``python -m benchmark.run baseline=policy``. Every agent
of the team is the policy (agent identity is in its prompt). Each decision keeps the prompt ids,
the generated ids and their rollout logprobs exactly as the generator produced them, and the
reward the agent received until its next decision. Workers run on Ray actors (one CPU each) or
in the trainer's process; every episode's sampling is seeded from its spec, so the result does
not depend on which worker plays it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from baselines.rl.core.checks import ConfigError, at_least, in_range, one_of
from baselines.rl.core.llm_teams import LLM_TEAMS, training_team
from baselines.rl.core.policy_team import MODES, Decision, Generator, PolicyTeam
from benchmark.env import CollabEnv, EnvOptions
from benchmark.llm.batching import BatchSeat, run_batched
from benchmark.llm.resources import LLMResources
from benchmark.metrics.episode import episode_metrics
from benchmark.rollout import run_episode
from benchmark.tasks.spec import AMBIGUITY_LEVELS

TEAMS = ("policy", *LLM_TEAMS)

__all__ = [
    "Decision",
    "EpisodeResult",
    "EpisodeSpec",
    "Generator",
    "RolloutSettings",
    "RolloutWorker",
    "play_episode",
]


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
class RolloutSettings:
    """How episodes are played: the prompt view, sampling and the env options (one comment per
    field; part of the training config as ``rollout``)."""

    team: str = "policy"  # policy (the agent view) | llm_agents | llm_planner (their prompts)
    mode: str = "per_step"  # per_step (bounded history) | concat (one sequence per agent)
    history: int = 2  # past actions a per_step prompt repeats
    max_objects: int = 8  # known objects a prompt lists
    max_tokens: int = 12  # tokens generated per decision
    temperature: float = 1.0  # rollout sampling temperature
    top_p: float = 1.0  # rollout nucleus sampling
    max_context: int = 1024  # concat: longer agent sequences start a new segment
    reward_sharing: float = 0.7  # alpha: team share of each agent's reward
    comm: bool = True  # messages delivered
    ambiguity: str = "types"  # instruction phrasing
    prompt: str | None = None  # llm_agents / llm_planner: their prompt template (null: default)
    batch_episodes: int = 1  # llm teams: episodes a worker plays at once, their calls batched

    def __post_init__(self) -> None:
        one_of(self, "team", TEAMS)
        one_of(self, "mode", MODES)
        if self.team != "policy" and self.mode != "per_step":
            raise ConfigError("mode", self.mode, f"team={self.team} plays per_step only")
        if self.prompt is not None and self.team == "policy":
            raise ConfigError("prompt", self.prompt, "is for team=llm_agents or llm_planner")
        one_of(self, "ambiguity", AMBIGUITY_LEVELS)
        at_least(self, 0, "history", "temperature")
        at_least(self, 1, "max_objects", "max_tokens", "max_context", "batch_episodes")
        if self.batch_episodes > 1 and self.team == "policy":
            raise ConfigError("batch_episodes", self.batch_episodes, "is for the llm teams")
        if not 0 < self.top_p <= 1:
            raise ConfigError("top_p", self.top_p, "must be in (0, 1]")
        in_range(self, "reward_sharing", 0.0, 1.0)

    def env_options(self, split: str) -> EnvOptions:
        """The env options of a played episode drawn from scene split ``split``."""
        return EnvOptions(
            reward_sharing=self.reward_sharing,
            comm=self.comm,
            ambiguity=self.ambiguity,
            split=split,
        )

    def team_options(self) -> dict[str, Any]:
        """The :class:`~baselines.rl.core.policy_team.PolicyTeam` arguments: view and sampling."""
        names = ("history", "max_objects", "max_tokens", "temperature", "top_p", "mode")
        return {name: getattr(self, name) for name in (*names, "max_context")}


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
    options: RolloutSettings,
    keep_trace: bool = False,
    seat: BatchSeat | None = None,
) -> EpisodeResult:
    """Play one episode: one generator for every agent, or ``{"shared": g}``, or one per
    agent name (``policy_sharing=per_agent``). ``seat``: the episode's place in a batch of
    episodes played at once (their LLM calls batched)."""
    if not isinstance(generators, dict):
        generators = {"shared": generators}
    start = time.perf_counter()
    env = CollabEnv(spec.task, n_agents=spec.n_agents, options=options.env_options(spec.split))
    if options.team == "policy":
        team = PolicyTeam(
            generators=generators, episode_seed=spec.gen_seed, **options.team_options()
        )
    elif set(generators) != {"shared"}:
        raise ValueError(f"team={options.team} plays one shared policy (policy.sharing=shared)")
    else:
        kwargs: dict[str, Any] = {"temperature": options.temperature, "top_p": options.top_p}
        if options.prompt:
            kwargs["prompt"] = options.prompt
        team = training_team(options.team, generators["shared"], spec.gen_seed, **kwargs)
    team.bind(LLMResources(batch=seat))
    trace = run_episode(env, team, seed=spec.seed)
    decisions = team.decisions
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

    def __init__(self, make_generators: dict[str, Any], options: RolloutSettings) -> None:
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
        options: RolloutSettings | None = None,
    ) -> list[EpisodeResult]:
        """The episodes of ``specs``, in order; an llm team's ``batch_episodes`` at a time,
        their LLM calls batched (each chat sampled with its own call's seed, so an episode
        plays the same in any batch)."""
        opts = options or self.options
        if opts.batch_episodes <= 1:
            return [play_episode(self.generators, s, opts, keep_trace) for s in specs]
        out: list[EpisodeResult] = []
        for k in range(0, len(specs), opts.batch_episodes):
            chunk = specs[k : k + opts.batch_episodes]
            results, _ = run_batched(
                [
                    lambda seat, s=s: play_episode(self.generators, s, opts, keep_trace, seat)
                    for s in chunk
                ]
            )
            for result in results:
                if isinstance(result, BaseException):
                    raise result
                out.append(result)
        return out
