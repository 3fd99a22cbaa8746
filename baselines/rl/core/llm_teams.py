"""The LLM baselines as trainable teams: ``llm_agents`` and ``llm_planner`` played by the
trainer's policy, every LLM call recorded as a token-level decision.

The policy (a :class:`~baselines.rl.core.policy.Policy`, LoRA adapters included) is seen through an
``hf`` backend over its own model and tokenizer (:func:`policy_llm`), so a training rollout runs
the very code an evaluation runs (``baseline=llm_agents llm.adapter=...``): the same prompts,
the same decision and plan schemas, constrained decoding included. The logprobs kept are the
model's own (temperature 1) at each generated token, which the grammar's mask selects among but
does not change. A generation's end-of-sequence token is not part of it (the grammar forces it).

``llm_agents``: each agent's decision is one :class:`~baselines.rl.core.policy_team.Decision` with
the reward that agent received until its next decision. ``llm_planner``: each plan (the first
and every re-plan) is a decision of the agent ``planner`` with the team's mean reward until the
next plan. Sampling is seeded per episode and per call (``episode_seed * SEED_STRIDE + k``), as
for the policy team.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from baselines.llm_agents import LLMAgentsTeam
from baselines.llm_planner import LLMPlannerTeam
from baselines.rl.core.policy_team import SEED_STRIDE, Decision
from benchmark.env.views import TaskInfo
from benchmark.llm import LLM, Chat, Constraint, Generation, Sampling

LLM_TEAMS = ("llm_agents", "llm_planner")
PLANNER = "planner"  # the agent name of the planner's decisions


def policy_llm(policy: Any) -> Any:
    """An ``hf`` backend over ``policy``'s model and tokenizer (made once per policy; its
    prefix cache is emptied for every episode, since the weights may have changed)."""
    from benchmark.llm.hf import HFBackend

    view = getattr(policy, "_llm_view", None)
    if view is None:
        if not hasattr(policy, "model") or not hasattr(policy, "tokenizer"):
            raise ValueError(
                f"the LLM teams train a torch policy (policy.generator=torch), not "
                f"{type(policy).__name__}"
            )
        view = HFBackend.from_model(policy.model, policy.tokenizer, name="policy")
        policy._llm_view = view
    view.clear_prefix_cache()
    return view


class _Recorder:
    """An LLM that keeps the generations of its last call."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.usage = llm.usage
        self.last: list[Generation] = []

    def generate(
        self,
        chats: list[Chat],
        sampling: Sampling,
        constraints: list[Constraint | None] | None = None,
    ) -> list[Generation]:
        self.last = self.llm.generate(chats, sampling, constraints=constraints)
        return self.last

    def score(self, prompt: Chat, candidates: list[str]) -> list[float]:
        return self.llm.score(prompt, candidates)


def _decision(agent: str, turn: int, gen: Generation, action: str) -> Decision:
    return Decision(
        agent, turn, list(gen.prompt_ids), list(gen.token_ids), list(gen.logprobs), gen.text, action
    )


class _Seeded:
    """What both teams add to their baseline: the policy's backend (in place of the worker's
    pool; the resources the rollout lends still say whether the episode is batched), per-call
    sampling seeds and the decisions record (mixed in before the baseline's class)."""

    sampling: Sampling
    decisions: dict[str, list[Decision]]

    def __init__(
        self,
        llm: LLM,
        episode_seed: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm=None, **kwargs)  # the baseline's own arguments
        self.sampling = replace(self.sampling, temperature=temperature, top_p=top_p)
        self.llm_backend, self.episode_seed = llm, episode_seed

    def backend(self) -> LLM:
        """The policy's backend."""
        return self.llm_backend

    def _recorded(self, agent_ids: list[str]) -> list[str]:
        return agent_ids

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        super().reset(agent_ids, task_info)
        self.decisions = {a: [] for a in self._recorded(agent_ids)}
        self.calls = 0

    def _next_sampling(self) -> None:
        seed = (self.episode_seed * SEED_STRIDE + self.calls) % 2**63
        self.sampling = replace(self.sampling, seed=seed)
        self.calls += 1


class AgentsTrainingTeam(_Seeded, LLMAgentsTeam):
    """``llm_agents`` on the policy, recording every decision."""

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        self._next_sampling()
        self.replies = {}
        actions = super().act(observations)
        for a, gen in self.replies.items():
            if gen.token_ids:
                self.decisions[a].append(_decision(a, len(self.decisions[a]), gen, actions[a]))
        return actions

    def rewarded(self, rewards: dict[str, float]) -> None:
        for a, r in rewards.items():
            if self.decisions.get(a):
                self.decisions[a][-1].reward += float(r)


class PlannerTrainingTeam(_Seeded, LLMPlannerTeam):
    """``llm_planner`` on the policy, recording every plan."""

    def _load_llm(self) -> LLM:
        return _Recorder(super()._load_llm())

    def _recorded(self, agent_ids: list[str]) -> list[str]:
        return [PLANNER]

    def _replan(self) -> None:
        self._next_sampling()
        self.llm.last = []
        super()._replan()
        for gen in self.llm.last:
            if gen.token_ids:
                plan = self.decomposition
                text = "; ".join(s.action for s in plan.subtasks) if plan.ok else "no plan"
                self.decisions[PLANNER].append(
                    _decision(PLANNER, len(self.decisions[PLANNER]), gen, text)
                )

    def rewarded(self, rewards: dict[str, float]) -> None:
        if self.decisions[PLANNER] and rewards:
            self.decisions[PLANNER][-1].reward += sum(rewards.values()) / len(rewards)


def training_team(name: str, policy: Any, episode_seed: int, **options: Any) -> Any:
    """The LLM team ``name`` played by ``policy`` (``options``: temperature, top_p, and the
    baseline's own arguments such as its prompt)."""
    teams = {"llm_agents": AgentsTrainingTeam, "llm_planner": PlannerTrainingTeam}
    if name not in teams:
        raise ValueError(f"team={name!r} is not one of {list(LLM_TEAMS)}")
    return teams[name](policy_llm(policy), episode_seed, **options)
