"""The collab_bench agent loop against verl's real AgentLoopBase, post-processing and GRPO.

The model is a tiny random Llama served by a CPU stand-in for verl's GPU inference server
(verl_harness.CPUServerManager); it plays real episodes of a short transport task in the
embedded simulator, its agent loops meeting in the hub as a named Ray actor, as in verl.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import numpy as np
import pytest
import ray
import torch
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.trainer.ppo.core_algos import AdvantageEstimator
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl_harness import CPUServerManager, make_loop, postprocess, trainer_config

from baselines.rl.core.algos import grpo_advantages
from baselines.rl.core.policy import encode_prompt
from baselines.verl.agent_loop import CollabBenchAgentLoop
from baselines.verl.hub import METRIC_KEYS, EpisodeHub, ray_hub
from baselines.verl.metrics import batch_metrics
from baselines.verl.rows import EpisodeRow
from benchmark.env.replay import env_from_trace
from benchmark.tasks.episode import make_episode
from benchmark.tasks.spec import resolve_task

N_COPIES = 2  # rollout.n
MAX_TOKENS = 6


@pytest.fixture(scope="module")
def played(short_task: str, tiny_policy: Any, ray_local: Any) -> dict[str, Any]:
    """Two copies (rollout.n=2) of one 2-agent episode: 4 agent loops run together, verl's V0
    way (the copies of a row arrive one after another, paired by arrival order), and their
    outputs post-processed by verl into a DataProto."""
    scene = make_episode(resolve_task(short_task), None, 2, 3, split="train").scene
    rows = [EpisodeRow(short_task, scene, 3, 2, f"agent_{k}", "train") for k in range(2)]
    # verl repeats each row rollout.n times, interleaved: a0 a0 a1 a1.
    batch_rows = [r for r in rows for _ in range(N_COPIES)]
    uids = [f"uid-{r.agent}" for r in batch_rows]
    hub = ray_hub("test_loop_hub_0", timeout_s=120.0, keep_traces=True)
    config = trainer_config(batch=len(rows))
    server = CPUServerManager(tiny_policy)
    tok = tiny_policy.tokenizer
    loops = [
        make_loop(config, server, tok, max_tokens=MAX_TOKENS, hub_name="test_loop_hub")
        for _ in batch_rows
    ]
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}

    async def play() -> tuple[list[Any], Any]:
        outs = await asyncio.gather(
            *(
                loop.run(sampling, extra_info=r.as_extra_info(i), uid=u)
                for i, (loop, r, u) in enumerate(zip(loops, batch_rows, uids, strict=True))
            )
        )
        raw = np.empty(len(uids), dtype=object)
        for i, r in enumerate(batch_rows):
            raw[i] = [{"role": "user", "content": f"{r.episode_key} {r.agent}"}]
        non_tensor = {"uid": np.array(uids, dtype=object), "raw_prompt": raw}
        return list(outs), await postprocess(config, tok, list(outs), non_tensor)

    outputs, data = asyncio.run(play())
    traces = {
        o.extra_fields["episode_id"]: ray_local.get(hub.trace.remote(o.extra_fields["episode_id"]))
        for o in outputs
    }
    return {
        "outputs": outputs,
        "data": data,
        "server": server,
        "traces": traces,
        "rows": batch_rows,
        "tok": tok,
        "hub": hub,
    }


def test_rollout_copies_pair_into_separate_episodes(played: dict[str, Any]) -> None:
    outs = played["outputs"]
    copies = {o.extra_fields["episode_id"] for o in outs}
    assert len(copies) == N_COPIES
    for cid in copies:
        agents = sorted(
            o.extra_fields["agent_id"] for o in outs if o.extra_fields["episode_id"] == cid
        )
        assert agents == ["agent_0", "agent_1"]
    assert ray.get(played["hub"].pending.remote()) == []  # finished copies are forgotten


def test_mask_covers_exactly_the_generated_tokens(played: dict[str, Any]) -> None:
    tok, server = played["tok"], played["server"]
    outs = played["outputs"]
    for o in outs:
        assert o.extra_fields["segments"] == 1  # the budget holds the whole episode
        mine = server.by_request(o.extra_fields["request_id"])
        assert len(mine) == o.extra_fields["turn"] == o.extra_fields["decisions"] >= 1
        ids, mask = np.array(o.response_ids), np.array(o.response_mask)
        generated = [t for c in mine for t in c.token_ids]
        assert ids[mask == 1].tolist() == generated
        assert tok.decode(ids[mask == 1].tolist()) == "".join(tok.decode(c.token_ids) for c in mine)
        lps = np.array(o.response_logprobs)
        assert np.allclose(lps[mask == 1], [x for c in mine for x in c.log_probs])
        assert np.all(lps[mask == 0] == 0.0)
        # The whole sequence is what the server completed last, plus its completion; the
        # masked tokens are the views (observations, received messages) that came between.
        assert o.prompt_ids + o.response_ids == mine[-1].prompt_ids + mine[-1].token_ids
        views = tok.decode(ids[mask == 0].tolist())
        assert views.count("Action:") == len(mine) - 1
        assert mask[-1] == 1  # the reward token is a generated one


def test_sequence_layout_is_the_concat_rollout(played: dict[str, Any]) -> None:
    """Each later decision appends encode("\\n" + view) after the previous reply, as
    PolicyTeam's concat mode does."""
    tok, server = played["tok"], played["server"]
    o = played["outputs"][0]
    mine = server.by_request(o.extra_fields["request_id"])
    assert len(mine) >= 2
    for before, after in itertools.pairwise(mine):
        context = before.prompt_ids + before.token_ids
        assert after.prompt_ids[: len(context)] == context
        view = tok.decode(after.prompt_ids[len(context) :])
        assert after.prompt_ids[len(context) :] == encode_prompt(tok, view)
        assert view.startswith("\n") and view.rstrip().endswith("Action:")


def test_rewards_are_the_env_returns(played: dict[str, Any]) -> None:
    data = played["data"]
    for b, o in enumerate(played["outputs"]):
        trace = played["traces"][o.extra_fields["episode_id"]]
        env = env_from_trace(trace)
        returns: dict[str, float] = dict.fromkeys(env.possible_agents, 0.0)
        for step in trace["decisions"]:
            if not env.agents:
                break
            _, rewards, *_ = env.step(step["actions"], observe=False)
            for agent, r in rewards.items():
                returns[agent] += r
        assert o.reward_score == pytest.approx(returns[o.extra_fields["agent_id"]])
        assert o.extra_fields["team_reward"] == pytest.approx(sum(returns.values()) / 2)
        assert float(data.batch["rm_scores"][b].sum()) == pytest.approx(o.reward_score)
        assert trace["config"]["options"]["reward_sharing"] == 0.7


def test_extra_fields_and_metrics_reach_the_batch(played: dict[str, Any]) -> None:
    data = played["data"]
    nt = data.non_tensor_batch
    for key in ("agent_id", "turn", "policy_id", "team_reward", "episode_key", "episode_id"):
        assert key in nt, key
    assert list(nt["agent_id"]) == [r.agent for r in played["rows"]]
    assert set(nt["policy_id"]) == {"shared"}
    for key in METRIC_KEYS:
        assert key in nt and len(nt[key]) == len(played["rows"])  # verl's reward_extra_info
    assert "task/SR" in data.meta_info["reward_extra_keys"]
    metrics = batch_metrics(nt)
    assert metrics["episodes"] == N_COPIES
    trace_sr = [float(t["final"]["success"]) for t in played["traces"].values()]
    assert metrics["task/SR"] == pytest.approx(np.mean(trace_sr))
    assert metrics["task/L"] == pytest.approx(
        np.mean([t["final"]["ticks"] for t in played["traces"].values()])
    )
    assert all(isinstance(v, int) for v in nt["min_global_steps"])


def test_data_proto_masks_match_the_outputs(played: dict[str, Any]) -> None:
    data = played["data"]
    for b, o in enumerate(played["outputs"]):
        n = len(o.response_ids)
        assert data.batch["response_mask"][b, :n].tolist() == o.response_mask
        assert int(data.batch["response_mask"][b, n:].sum()) == 0
        assert data.batch["responses"][b, :n].tolist() == o.response_ids
        assert torch.allclose(
            data.batch["rollout_log_probs"][b, :n], torch.tensor(o.response_logprobs)
        )


def test_verl_grpo_equals_ours_on_the_batch(played: dict[str, Any]) -> None:
    """verl's GRPO (groups by uid: the rollout.n copies of one agent row) against
    baselines.rl.core.algos.grpo_advantages with our groups (seed and agent), on the batch's own
    rewards and on distinct rewards at the same reward positions (a random tiny model rarely
    makes progress, and equal rewards would make every advantage 0)."""
    data = played["data"]
    uid = data.non_tensor_batch["uid"]
    groups = torch.tensor([sorted(set(uid)).index(u) for u in uid])
    seeded = torch.Generator().manual_seed(0)
    scores = data.batch["rm_scores"]
    for rewards in (scores, _at_reward_token(data, seeded)):
        data.batch["token_level_rewards"] = rewards
        out = compute_advantage(data, adv_estimator=AdvantageEstimator.GRPO)
        mask = out.batch["response_mask"].bool()
        ours = grpo_advantages(rewards.sum(-1), groups)
        for b in range(len(uid)):
            assert torch.allclose(
                out.batch["advantages"][b][mask[b]], ours[b].expand(int(mask[b].sum())), atol=1e-5
            )
    assert len(set(uid)) == 2 and torch.any(ours != 0)


def _at_reward_token(data: Any, gen: torch.Generator) -> torch.Tensor:
    """Distinct random rewards at each row's last response token (where verl puts its score)."""
    mask = data.batch["attention_mask"][:, data.batch["prompts"].shape[1] :]
    last = mask.sum(-1) - 1
    out = torch.zeros(mask.shape)
    out[torch.arange(len(last)), last] = torch.rand(len(last), generator=gen)
    return out


def _direct_loop(config: Any, server: Any, tok: Any, hub: Any, **settings: Any) -> Any:
    return CollabBenchAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=tok,
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        hub=hub,
        **settings,
    )


def test_a_full_sequence_starts_an_untrained_segment(short_task: str, tiny_policy: Any) -> None:
    """With a response budget too small for a second view, each agent's output is its first
    decision only (and fits verl's padding); the agent still plays all its decisions, in fresh
    segments, against the in-process hub."""
    scene = make_episode(resolve_task(short_task), None, 2, 3, split="train").scene
    rows = [EpisodeRow(short_task, scene, 3, 2, f"agent_{k}", "train") for k in range(2)]
    config = trainer_config(response_length=2 * MAX_TOKENS, batch=2)
    server, tok, hub = CPUServerManager(tiny_policy), tiny_policy.tokenizer, EpisodeHub(60.0)
    loops = [_direct_loop(config, server, tok, hub, max_tokens=MAX_TOKENS) for _ in rows]
    sampling = {"temperature": 1.0, "top_p": 1.0, "logprobs": False}

    async def play() -> list[Any]:
        return await asyncio.gather(
            *(
                lp.run(sampling, extra_info=r.as_extra_info(i))
                for i, (lp, r) in enumerate(zip(loops, rows, strict=True))
            )
        )

    outs = asyncio.run(play())
    for o in outs:
        calls = server.by_request(o.extra_fields["request_id"])
        assert o.extra_fields["turn"] == 1 and o.response_mask == [1] * len(o.response_ids)
        assert o.extra_fields["decisions"] == len(calls) == o.extra_fields["segments"] > 1
        assert o.prompt_ids + o.response_ids == calls[0].prompt_ids + calls[0].token_ids
        assert all(c.prompt_ids == encode_prompt(tok, tok.decode(c.prompt_ids)) for c in calls)
        assert o.response_logprobs is None
        assert len(o.response_ids) <= config.actor_rollout_ref.rollout.response_length


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"data": {"shuffle": True}}, "needs data.shuffle=false"),
        ({"actor_rollout_ref": {"rollout": {"response_length": 4}}}, "exceeds"),
    ],
)
def test_configs_that_would_break_episodes_are_refused(
    tiny_policy: Any, change: dict[str, Any], message: str
) -> None:
    config = OmegaConf.merge(trainer_config(), change)
    with pytest.raises(ValueError, match=message):
        _direct_loop(config, None, tiny_policy.tokenizer, EpisodeHub(), max_tokens=MAX_TOKENS)


def test_a_batch_size_that_splits_episodes_is_refused(short_task: str, tiny_policy: Any) -> None:
    row = EpisodeRow(short_task, "FloorPlan1", 0, 2, "agent_0", "train")
    loop = _direct_loop(trainer_config(batch=3), None, tiny_policy.tokenizer, EpisodeHub())
    with pytest.raises(ValueError, match="train_batch_size=3 is not a multiple of n_agents=2"):
        asyncio.run(loop.run({}, extra_info=row.as_extra_info(0)))
