"""The RL data path: the agent view's names, samples, masks, rewards and group keys."""

from __future__ import annotations

import pytest
import torch

from baselines.rl.core import algos
from baselines.rl.core.agent_view import AgentView
from baselines.rl.core.rollout import Decision, EpisodeResult, EpisodeSpec
from baselines.rl.core.samples import collate, episode_samples, per_unit
from benchmark.skills import skill_names

APPLE = "Apple|-00.47|+01.15|+00.48"
CAB1 = "Cabinet|-01.00|+00.40|+02.00"
CAB2 = "Cabinet|+01.00|+00.40|+02.00"
TASK = "transport_apple_fridge_v0"
FRIDGE = "Fridge|-02.10|+00.00|+01.00"


def _obs(visible, holding="", messages=(), decide=True, success=True):
    return {
        "visible": [
            {"objectId": oid, "objectType": oid.split("|")[0], "distance": d, "state": st, "in": ""}
            for oid, d, st in visible
        ],
        "holding": holding,
        "messages": list(messages),
        "needs_decision": int(decide),
        "last_success": int(success),
    }


def test_view_names_objects_and_maps_replies_both_ways() -> None:
    view = AgentView("agent_0", ["agent_0", "agent_1"], "Put the apple in the fridge.")
    view.update(_obs([(CAB1, 1.0, "closed"), (APPLE, 2.0, "")]))
    assert view.name_of(CAB1) == "Cabinet" and view.name_of(APPLE) == "Apple"
    view.update(_obs([(CAB2, 1.5, "closed")]))
    # A second cabinet: both get numbered names in discovery order.
    assert (view.name_of(CAB1), view.name_of(CAB2)) == ("Cabinet_1", "Cabinet_2")
    prompt = view.prompt()
    # Objects the instruction names come first; remembered objects stay listed.
    known = prompt.split("Known: ")[1].split("\n")[0]
    assert known.startswith("Apple") and "Cabinet_2 [closed] 2m" in known
    assert view.to_action("pickup Apple | say all: got Apple") == (
        f"pickup {APPLE} | say all: got {APPLE}"
    )
    assert view.to_action("open Cabinet_2\nmore text") == f"open {CAB2}"
    # Unknown names pass through and fail in the environment with feedback.
    assert view.to_action("open Microwave") == "open Microwave"
    assert view.to_reply(f"put {FRIDGE}") is None
    assert view.to_reply(f"open {CAB1} | say all: searched {CAB1}") == (
        "open Cabinet_1 | say all: searched Cabinet_1"
    )


def test_view_learns_objects_from_messages_and_keeps_history() -> None:
    view = AgentView("agent_1", ["agent_0", "agent_1"], "Put the apple in the fridge.", history=1)
    view.update(_obs([], messages=[{"sender": "agent_0", "text": f"found {APPLE}"}]))
    assert "From agent_0: found Apple" in view.prompt()
    view.to_action("pickup Apple")
    view.update(_obs([], holding=APPLE, success=True))
    view.to_action("explore")
    view.update(_obs([], holding=APPLE, success=False))
    prompt = view.prompt()
    assert "Holding: Apple." in prompt
    assert "Did: explore -> failed" in prompt and "pickup Apple" not in prompt  # history=1


def _decision(agent, turn, prompt, gen, reward, segment=0):
    return Decision(agent, turn, prompt, gen, [-0.5] * len(gen), "", "", reward, segment)


def _result(index, group, decisions):
    spec = EpisodeSpec("t", 2, 7, "train", gen_seed=index, group=group, index=index)
    return EpisodeResult(spec, decisions, {}, {}, 0.0, 0)


def test_per_step_samples_mask_generated_tokens_and_put_the_return_on_the_last() -> None:
    res = _result(
        0,
        0,
        {
            "agent_0": [
                _decision("agent_0", 0, [1, 2, 3], [7, 8], 0.5),
                _decision("agent_0", 1, [1, 4], [9], 1.0),
            ],
            "agent_1": [_decision("agent_1", 0, [5], [6, 6, 6], 0.0)],
        },
    )
    samples = episode_samples(res, "per_step", "episode")
    s0 = samples[0]
    assert s0.ids == [1, 2, 3, 7, 8] and s0.mask == [0, 0, 0, 1, 1]
    assert s0.logprobs == [0, 0, 0, -0.5, -0.5]
    assert s0.R == 1.5 and s0.rewards == [(4, 1.5)]
    assert samples[1].R == 1.5 and samples[1].rewards == [(2, 1.5)]
    assert s0.group == (0,) and s0.unit == samples[1].unit != samples[2].unit
    to_go = episode_samples(res, "per_step", "to_go", group_by=("agent", "turn"))
    assert [s.R for s in to_go] == [1.5, 1.0, 0.0]
    assert to_go[1].group == (0, "agent_0", 1) and to_go[0].unit != to_go[1].unit
    with pytest.raises(ValueError, match="group_by"):
        episode_samples(res, group_by=("scene",))


def test_concat_samples_hold_every_turn_and_reward_each_turn_end() -> None:
    first = _decision("agent_0", 0, [1, 2], [3, 4], 0.25)
    second = _decision("agent_0", 1, [1, 2, 3, 4, 10], [11], 1.0)
    res = _result(0, 0, {"agent_0": [first, second]})
    (s,) = episode_samples(res, "concat", "episode")
    assert s.ids == [1, 2, 3, 4, 10, 11]
    assert s.mask == [0, 0, 1, 1, 0, 1]
    assert s.rewards == [(3, 0.25), (5, 1.0)] and s.R == 1.25
    broken = _decision("agent_0", 1, [1, 2, 99, 4, 10], [11], 1.0)
    with pytest.raises(ValueError, match="do not extend"):
        episode_samples(_result(0, 0, {"agent_0": [first, broken]}), "concat")


def test_unit_advantages_compare_trajectories_not_decisions() -> None:
    # Two rollouts of one seed: agent trajectories of 3 and 1 decisions with returns 2 and 0.
    win = _result(
        0, 0, {"agent_0": [_decision("agent_0", k, [1], [2], 2.0 * (k == 2)) for k in range(3)]}
    )
    lose = _result(1, 0, {"agent_0": [_decision("agent_0", 0, [1], [2], 0.0)]})
    other = _result(2, 1, {"agent_0": [_decision("agent_0", 0, [1], [2], 5.0)]})
    batch = collate([s for r in (win, lose, other) for s in episode_samples(r)], pad_id=0)
    adv = per_unit(batch, algos.grpo_advantages)
    # Unit-level: mean 1, unbiased std sqrt(2) -> +-0.7071; the group of one gets 0.
    expect = 1 / 2**0.5
    assert torch.allclose(adv, torch.tensor([expect] * 3 + [-expect, 0.0]), atol=1e-4)
    keep = per_unit(batch, algos.nonzero_variance_groups)
    assert keep.tolist() == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert batch.rewards.sum() == 2.0 * 3 + 5.0  # each per-step sample carries its R


def test_teacher_actions_in_real_episodes_survive_the_round_trip_through_names() -> None:
    """On the real env with the heuristic team: every teacher action the view can express
    maps back to exactly that action, and almost all of them can be expressed."""
    from benchmark.agents import make_team
    from benchmark.env.collab_env import CollabEnv, EnvOptions

    expressed = skipped = 0
    for seed in range(3):
        env = CollabEnv("transport_apple_fridge_v0", n_agents=2, options=EnvOptions(split="train"))
        obs, _ = env.reset(seed=seed)
        agents = list(env.possible_agents)
        team = make_team("heuristic")
        team.reset(agents, env.task_info())
        views = {a: AgentView(a, agents, env.instruction) for a in agents}
        while env.agents:
            for a in agents:
                views[a].update(obs[a])
            actions = team.act(obs)
            for a, action in actions.items():
                reply = views[a].to_reply(action)
                if reply is None:
                    skipped += 1
                    continue
                expressed += 1
                assert views[a].to_action(reply) == action
            obs, *_ = env.step(actions)
    assert expressed > 50 and skipped <= 0.1 * expressed


@pytest.mark.parametrize("teacher", ["heuristic", "oracle"])
def test_the_demonstrator_records_the_teacher_without_changing_its_episode(teacher: str) -> None:
    from baselines.rl.recipes.sft import Demonstrator
    from benchmark.agents import make_team
    from benchmark.env.collab_env import CollabEnv, EnvOptions
    from benchmark.rollout import run_episode

    options = EnvOptions(split="train", observability="full" if teacher == "oracle" else "partial")
    plain = run_episode(CollabEnv(TASK, n_agents=2, options=options), make_team(teacher), seed=4)
    team = Demonstrator(make_team(teacher))
    traced = run_episode(CollabEnv(TASK, n_agents=2, options=options), team, seed=4)
    assert traced["trace_hash"] == plain["trace_hash"]
    decided = sum(len(step["actions"]) for step in plain["decisions"])
    assert len(team.pairs) + team.skipped == decided and len(team.pairs) > team.skipped
    for agent, prompt, reply in team.pairs:
        assert prompt.startswith(f"{agent} of 2. Task:") and prompt.endswith("Action:")
        assert reply.split()[0] in skill_names()


def test_successful_only_keeps_the_teacher_episodes_it_solved_and_counts_the_rest() -> None:
    from omegaconf import OmegaConf

    from baselines.rl.core.config import SFTConfig
    from baselines.rl.recipes.sft import demonstrations
    from benchmark.agents import make_team
    from benchmark.env.collab_env import CollabEnv, EnvOptions
    from benchmark.metrics.episode import episode_metrics
    from benchmark.rollout import run_episode

    tasks = ["switch_off_bedroom_v0", "switch_off_kitchen_v0"]
    cfg = OmegaConf.structured(SFTConfig)
    cfg.merge_with({"tasks": tasks, "episodes": 6, "successful_only": True})
    demos, stats = demonstrations(cfg)
    solved = set()
    for k in range(6):  # the teacher's own episodes, played apart
        env = CollabEnv(tasks[k % 2], n_agents=2, options=EnvOptions(split="train"))
        if episode_metrics(run_episode(env, make_team("heuristic"), seed=k))["SR"]:
            solved.add(k)
    assert 0 < len(solved) < 6  # these seeds hold both outcomes
    assert {d["seed"] for d in demos} == solved
    assert stats["episodes_dropped"] == 6 - len(solved)
    assert stats["teacher_SR"] == len(solved) / 6
