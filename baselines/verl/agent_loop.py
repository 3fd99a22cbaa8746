"""CollabBench as a verl agent loop: one dataset row plays one agent of one episode copy.

The loop joins its episode copy in the hub (:mod:`.hub`). At each of its decisions it updates its
agent view with the observations since its last turn
(:class:`baselines.rl.core.agent_view.AgentView`, the RL trainer's view) and renders the prompt. It
asks verl's rollout server for the reply as token ids (``server_manager.generate``), then hands the
reply, mapped to an action, back to the hub. The output carries this agent's tokens only, with the
token layout of the RL trainer's ``concat`` rollout mode
(:class:`baselines.rl.core.policy_team.PolicyTeam`):

    prompt_ids   = encode(view_1)                               (the first decision's prompt)
    response_ids = reply_1  encode("\\n" + view_2)  reply_2  ...  reply_k
    response_mask  1...1    0.......0              1...1         1...1
    response_logprobs: the server's logprob of each reply token, 0.0 on observation tokens

``encode`` is :func:`baselines.rl.core.policy.encode_prompt`: the chat template's user turn when the
tokenizer has one, else the plain text. Observations and received messages therefore enter as
masked tokens. The sequence grows by PolicyTeam's rule: a new view is appended while the sequence,
plus the view and ``max_tokens``, stays within the first prompt plus ``rollout.response_length``.
PolicyTeam's ``max_context`` is thus the first prompt plus the response length. When the next
view would not fit, the agent starts a new segment, as PolicyTeam does. It keeps playing, since
the others depend on it, but only the first segment is returned. verl's V0 trainer takes one
output per row, so later segments are not trained. Their decisions are counted in
``extra_fields``.

``reward_score`` is the agent's own return r_i = sum over ticks of
alpha * team + (1 - alpha) * own + bonus (the env's reward sharing, ``reward_sharing``). verl
puts it on the last response token, which is always a reply token. ``extra_fields`` holds
``agent_id``, ``turn`` (the decisions in the output), ``decisions`` (all of the agent's),
``segments``, ``policy_id``, ``team_reward`` (the mean of the agents' returns), ``episode_key``,
``episode_id`` (the copy), ``request_id`` (the server session of this agent's calls) and
``reward_extra_info`` (the episode's metrics, :mod:`.metrics`).

Configured from verl's agent-loop yaml (``agent_loops.yaml`` beside this file); every key is a
constructor argument of :class:`CollabBenchAgentLoop`.
"""

from __future__ import annotations

import time
import uuid
import zlib
from dataclasses import asdict, dataclass
from typing import Any

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)

from baselines.rl.core.agent_view import AgentView
from baselines.rl.core.policy import encode_prompt
from baselines.verl.hub import HubError, ray_hub
from baselines.verl.rows import AGENT_NAME, EpisodeRow
from benchmark.tasks.spec import AMBIGUITY_LEVELS

POLICY_ID = "shared"  # every agent is the one policy verl trains (identity is in the prompt)


@dataclass(frozen=True)
class LoopSettings:
    """The loop's options (the keys of its entry in the agent-loop yaml).

    Attributes:
        max_tokens: generated tokens per decision (the reply with its message).
        history: past actions (with their results) a prompt repeats.
        max_objects: known objects a prompt lists.
        reward_sharing: alpha, the team share of each agent's reward.
        comm: whether messages are delivered.
        ambiguity: the instruction phrasing (explicit, types, implicit).
        token_cap: the env's message cap in whitespace tokens (longer messages are truncated).
        hub_name: the name of the hub actor(s) in the Ray job.
        hub_shards: how many hub actors share the episodes (by episode key).
        hub_timeout_s: how long a loop waits for its episode's other agents (seconds).
    """

    max_tokens: int = 512
    history: int = 2
    max_objects: int = 8
    reward_sharing: float = 0.7
    comm: bool = True
    ambiguity: str = "types"
    token_cap: int = 32
    hub_name: str = "collab_bench_hub"
    hub_shards: int = 1
    hub_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        for name in ("max_tokens", "max_objects", "token_cap", "hub_shards"):
            if getattr(self, name) < 1:
                raise ValueError(f"{AGENT_NAME}.{name}={getattr(self, name)} must be >= 1")
        if self.history < 0:
            raise ValueError(f"{AGENT_NAME}.history={self.history} must be >= 0")
        if not 0.0 <= self.reward_sharing <= 1.0:
            raise ValueError(f"{AGENT_NAME}.reward_sharing={self.reward_sharing} not in [0, 1]")
        if self.ambiguity not in AMBIGUITY_LEVELS:
            raise ValueError(
                f"{AGENT_NAME}.ambiguity={self.ambiguity!r} is not one of {list(AMBIGUITY_LEVELS)}"
            )
        if not self.hub_timeout_s > 0:
            raise ValueError(f"{AGENT_NAME}.hub_timeout_s={self.hub_timeout_s} must be > 0")

    def env_options(self) -> dict[str, Any]:
        """The :class:`~benchmark.env.EnvOptions` fields every copy is played with."""
        return {
            "reward_sharing": self.reward_sharing,
            "comm": self.comm,
            "ambiguity": self.ambiguity,
            "token_cap": self.token_cap,
        }


_HUBS: dict[str, Any] = {}  # hub actor handles of this worker process, by name


async def call_hub(hub: Any, method: str, *args: Any) -> Any:
    """``hub.method(*args)`` on a Ray actor handle or an in-process hub."""
    fn = getattr(hub, method)
    if hasattr(fn, "remote"):
        return await fn.remote(*args)
    return await fn(*args)


@register(AGENT_NAME)
class CollabBenchAgentLoop(AgentLoopBase):
    """Plays one agent of one CollabBench episode copy (see the module docstring).

    Args (besides verl's): the :class:`LoopSettings` fields, and ``hub``: an
    :class:`~baselines.verl.hub.EpisodeHub` or its actor handle to use instead of the named
    Ray actor(s) (tests).
    """

    def __init__(self, *args: Any, hub: Any = None, **kwargs: Any) -> None:
        names = LoopSettings.__dataclass_fields__
        self.settings = LoopSettings(**{k: kwargs.pop(k) for k in list(kwargs) if k in names})
        super().__init__(*args, **kwargs)
        self.hub = hub
        self.response_length = int(self.rollout_config.response_length)
        self.prompt_length = int(self.rollout_config.prompt_length)
        if self.settings.max_tokens > self.response_length:
            raise ValueError(
                f"{AGENT_NAME}.max_tokens={self.settings.max_tokens} exceeds "
                f"actor_rollout_ref.rollout.response_length={self.response_length}"
            )
        if bool(self.data_config.get("shuffle", False)):
            raise ValueError(
                "data.shuffle=true scatters an episode's agent rows over batches; the "
                f"{AGENT_NAME} agent loop needs data.shuffle=false"
            )

    def _check_batch(self, row: EpisodeRow) -> None:
        for key in ("train_batch_size", "val_batch_size"):
            size = self.data_config.get(key)
            if size and int(size) % row.n_agents:
                raise ValueError(
                    f"data.{key}={size} is not a multiple of n_agents={row.n_agents} "
                    f"(episode {row.episode_key}): its agent rows would fall in two batches"
                )

    def _hub_for(self, row: EpisodeRow) -> Any:
        if self.hub is not None:
            return self.hub
        s = self.settings
        name = f"{s.hub_name}_{zlib.crc32(row.episode_key.encode()) % s.hub_shards}"
        if name not in _HUBS:
            _HUBS[name] = ray_hub(name, s.hub_timeout_s)
        return _HUBS[name]

    def _encode(self, text: str) -> list[int]:
        return encode_prompt(self.tokenizer, text)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play this row's agent to the end of its episode copy; see the module docstring."""
        s = self.settings
        row = EpisodeRow.from_extra_info(kwargs.get("extra_info"))
        self._check_batch(row)
        hub = self._hub_for(row)
        session = kwargs.get("session_id")
        session = None if session is None else int(session)
        copy_id = await call_hub(hub, "join", asdict(row), s.env_options(), session)
        try:
            return await self._play(hub, copy_id, row, sampling_params)
        except HubError:
            raise
        except Exception as err:
            await call_hub(hub, "abandon", copy_id, row.agent, f"{type(err).__name__}: {err}")
            raise

    async def _play(
        self, hub: Any, copy_id: str, row: EpisodeRow, sampling_params: dict[str, Any]
    ) -> AgentLoopOutput:
        s = self.settings
        request_id = uuid.uuid4().hex
        params = {**sampling_params, "max_tokens": s.max_tokens}
        want_logprobs = bool(sampling_params.get("logprobs"))

        prompt_ids: list[int] = []
        response_ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] = []
        context: list[int] = []  # the current segment's tokens (what the server completes)
        budget = 0  # the current segment's length limit
        segment = decisions = trained = 0
        steps: list[int] = []
        gen_s = hub_s = 0.0

        start = time.perf_counter()
        turn = await call_hub(hub, "exchange", copy_id, row.agent, None)
        hub_s += time.perf_counter() - start
        view = AgentView(row.agent, _agents(row), turn["instruction"], s.history, s.max_objects)
        while turn["decide"]:
            for obs in turn["observations"]:
                view.update(obs)
            text = view.prompt()
            chunk = self._encode("\n" + text) if context else []
            if context and len(context) + len(chunk) + s.max_tokens <= budget:
                ids = context + chunk
            else:
                if context:  # a new segment: fresh prompt, as PolicyTeam does
                    segment += 1
                ids = self._encode(text)
                budget = len(ids) + self.response_length
                chunk = []
            if segment == 0:
                if not prompt_ids:
                    if len(ids) > self.prompt_length:
                        raise ValueError(
                            f"episode {row.episode_key} {row.agent}: the first prompt has "
                            f"{len(ids)} tokens, more than actor_rollout_ref.rollout."
                            f"prompt_length={self.prompt_length}"
                        )
                    prompt_ids = list(ids)
                response_ids += chunk
                mask += [0] * len(chunk)
                logprobs += [0.0] * len(chunk)

            start = time.perf_counter()
            out = await self.server_manager.generate(
                request_id=request_id, prompt_ids=ids, sampling_params=params
            )
            gen_s += time.perf_counter() - start
            gen_ids = list(out.token_ids)
            steps += [v for k, v in out.extra_fields.items() if k.endswith("global_steps")]
            if segment == 0:
                response_ids += gen_ids
                mask += [1] * len(gen_ids)
                if want_logprobs:
                    if out.log_probs is None or len(out.log_probs) != len(gen_ids):
                        raise ValueError(
                            f"the rollout server gave no logprob per generated token "
                            f"({row.agent}, decision {decisions}); sampling_params asked for them"
                        )
                    logprobs += [float(x) for x in out.log_probs]
                trained += 1
            decisions += 1
            context = ids + gen_ids
            reply = self.tokenizer.decode(gen_ids, skip_special_tokens=True)
            action = view.to_action(reply)
            start = time.perf_counter()
            turn = await call_hub(hub, "exchange", copy_id, row.agent, action)
            hub_s += time.perf_counter() - start

        result = turn["result"]
        extra: dict[str, Any] = {
            "agent_id": row.agent,
            "turn": trained,
            "decisions": decisions,
            "segments": segment + 1,
            "policy_id": POLICY_ID,
            "team_reward": float(result["team_reward"]),
            "episode_key": row.episode_key,
            "episode_id": copy_id,
            "request_id": request_id,
            "reward_extra_info": dict(result["metrics"]),
        }
        if steps:
            extra["min_global_steps"], extra["max_global_steps"] = int(min(steps)), int(max(steps))
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=logprobs if want_logprobs else None,
            reward_score=float(result["returns"][row.agent]),
            num_turns=2 * trained,
            metrics=AgentLoopMetrics(generate_sequences=gen_s, tool_calls=hub_s),
            extra_fields=extra,
        )


def _agents(row: EpisodeRow) -> list[str]:
    return [f"agent_{k}" for k in range(row.n_agents)]
