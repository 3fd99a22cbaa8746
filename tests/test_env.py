"""CollabEnv: the skill grammar, the tick time model, messaging, rewards and observability."""

from __future__ import annotations

import pytest

from benchmark.env import make_env
from benchmark.env.grammar import ParseError, parse_action
from benchmark.env.messaging import cap_tokens
from benchmark.sim.planning import interaction_poses, sight_poses

TRANSPORT = "transport_produce_fridge_v0"


def _idle(env, **overrides) -> dict:
    actions = {a: "wait" for a in env.agents}
    actions.update(overrides)
    return actions


def _visible_ids(obs: dict) -> list[str]:
    return [o["objectId"] for o in obs["visible"]]


def test_the_grammar_parses_skills_targets_and_messages() -> None:
    call = parse_action("navigate Apple|-00.47|+01.15|+00.48 | say agent_1: the apple is here")
    assert (call.name, call.target) == ("navigate", "Apple|-00.47|+01.15|+00.48")
    assert call.say.to == "agent_1" and call.say.text == "the apple is here"
    assert parse_action("wait | say all: hold on").say.to == "all"
    assert parse_action("PickupObject Apple|1|2|3", level="primitive").name == "PickupObject"
    for bad in ("", "fly Apple", "navigate", "wait now", "explore | say bob: hi", 42):
        with pytest.raises(ParseError):
            parse_action(bad)


def test_garbage_actions_become_failure_feedback_not_exceptions() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0)
    env.reset()
    garbage = ["", "navigate", "\x00\x01", "pickup Nothing|1|2|3", "lift " * 400, None, 17, ["x"]]
    for text in garbage:
        obs, *_ = env.step({"agent_0": text, "agent_1": "wait"})
        assert obs["agent_0"]["last_success"] == 0
        assert obs["agent_0"]["feedback"]
    assert env.agents


def test_navigate_moves_one_cell_per_tick_and_step_returns_when_someone_must_decide() -> None:
    for seed in range(20):  # an episode where a target in the open is out of agent_0's sight
        env = make_env(TRANSPORT, n_agents=2, seed=seed, observability="full")
        env.reset()
        world = env.world
        me = world.agents[0]
        hidden = [
            a.subject
            for a in env.episode.checklist
            if not world.enclosed(world.index_of[a.subject])
            and min(
                abs(p.i - me.i) + abs(p.j - me.j)
                for p in sight_poses(world, world.index_of[a.subject])
            )
            >= 3
        ]
        if hidden:
            break
    target = hidden[0]
    start = env.world.agents[0]
    obs, *_ = env.step(_idle(env, agent_0=f"navigate {target}"))
    assert env.tick == 1, "agent_1 waited one tick and needs a decision"
    moved = env.world.agents[0]
    assert abs(moved.i - start.i) + abs(moved.j - start.j) <= 1
    ticks = 1
    while not obs["agent_0"]["needs_decision"]:
        before = env.world.agents[0]
        obs, *_ = env.step(_idle(env))
        after = env.world.agents[0]
        assert abs(after.i - before.i) + abs(after.j - before.j) <= 1
        ticks += 1
    assert obs["agent_0"]["last_success"] == 1
    assert target in _visible_ids(obs["agent_0"])
    assert ticks >= 3, "the target was several cells away"
    assert env.decisions[1] == ticks and env.decisions[0] == 1


def test_a_long_skill_runs_over_several_ticks_in_one_step_when_nobody_else_decides() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0, observability="full")
    env.reset()
    world, me = env.world, env.world.agents[0]
    far = max(
        (s for s in world.specs if s.pickupable and not world.enclosed(s.index)),
        key=lambda s: min(abs(p.i - me.i) + abs(p.j - me.j) for p in sight_poses(world, s.index)),
    )
    steps = min(abs(p.i - me.i) + abs(p.j - me.j) for p in sight_poses(world, far.index))
    assert steps >= 3
    obs, *_ = env.step({"agent_0": f"navigate {far.object_id}", "agent_1": "done"})
    assert env.tick >= steps, "one step ran the whole walk"
    assert obs["agent_0"]["needs_decision"] and obs["agent_0"]["last_success"]
    assert env.decisions == [1, 1]


def test_partial_observability_and_messages_that_name_objects() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=1)
    env.reset()
    unseen = next(
        s.object_id
        for s in env.world.specs
        if s.object_id not in env.known[0] and s.object_id not in env.known[1] and s.pickupable
    )
    obs, *_ = env.step(_idle(env, agent_0=f"navigate {unseen}"))
    assert obs["agent_0"]["last_success"] == 0 and "do not know" in obs["agent_0"]["feedback"]
    env.known[1].add(unseen)  # agent_1 has seen it ...
    obs, *_ = env.step(
        _idle(env, agent_1=f"wait | say agent_0: it is at {unseen}")
    )  # ... and says so
    assert [m["sender"] for m in obs["agent_0"]["messages"]] == ["agent_1"]
    obs, *_ = env.step(_idle(env, agent_0=f"navigate {unseen}"))
    assert "do not know" not in obs["agent_0"]["feedback"]


def test_messages_are_capped_logged_and_switched_off_on_request() -> None:
    text, tokens, truncated = cap_tokens("one two three four", 3)
    assert (text, tokens, truncated) == ("one two three", 4, True)
    env = make_env(TRANSPORT, n_agents=3, seed=0, token_cap=4)
    env.reset()
    obs, *_ = env.step(_idle(env, agent_0="wait | say all: a b c d e f g"))
    for name in ("agent_1", "agent_2"):
        assert obs[name]["messages"] == ({"sender": "agent_0", "text": "a b c d", "truncated": 1},)
    assert obs["agent_0"]["messages"] == ()
    assert env.postbox.log[-1].tokens == 7
    quiet = make_env(TRANSPORT, n_agents=2, seed=0, comm=False)
    quiet.reset()
    obs, *_ = quiet.step(_idle(quiet, agent_0="wait | say agent_1: hello"))
    assert obs["agent_1"]["messages"] == ()
    assert quiet.postbox.log[-1].delivered is False


def test_a_message_cost_delays_the_sender() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0, message_cost=3)
    env.reset()
    env.step({"agent_0": "wait | say all: hi", "agent_1": "done"})
    assert env.tick == 4, "three ticks talking, then the one-tick wait"


def test_capability_profiles_forbid_skills() -> None:
    env = make_env("transport_dishes_sink_v0", n_agents=2, seed=0, observability="full")
    env.reset()
    fridge = next(s.object_id for s in env.world.specs if s.openable)
    obs, *_ = env.step({"agent_0": "wait", "agent_1": f"open {fridge}"})
    assert obs["agent_1"]["last_success"] == 0 and "cannot open" in obs["agent_1"]["feedback"]
    assert env.task_info().cannot["agent_1"] == ("close", "open")
    failure = obs["agent_1"]["failure"]
    assert failure == {"reason": "not_allowed", "permanent": 1, "agent": ""}


def test_heavy_objects_need_two_agents_lifting_in_the_same_tick() -> None:
    env = make_env("heavy_box_sofa_v0", n_agents=2, seed=0, observability="full")
    env.reset()
    box = next(iter(env.episode.heavy))
    oid = env.world.specs[box].object_id
    for k in (0, 1):
        pose = interaction_poses(env.world, k, box)[0]
        env.controller.step(
            action="Teleport",
            position={"x": pose.i * 0.25, "z": pose.j * 0.25},
            rotation=pose.rotation,
            horizon=pose.horizon,
            agentId=k,
        )
    obs, *_ = env.step({"agent_0": f"pickup {oid}", "agent_1": "wait"})
    assert "too heavy" in obs["agent_0"]["feedback"]
    assert obs["agent_0"]["failure"]["reason"] == "too_heavy"
    assert obs["agent_0"]["failure"]["permanent"] == 1, "a pickup of a heavy object never works"
    obs, *_ = env.step({"agent_0": f"lift {oid}", "agent_1": "wait"})
    assert "second agent" in obs["agent_0"]["feedback"]
    assert obs["agent_0"]["failure"] == {"reason": "needs_partner", "permanent": 0, "agent": ""}
    obs, *_ = env.step({"agent_0": f"lift {oid}", "agent_1": f"lift {oid}"})
    holders = [a.held for a in env.world.agents]
    assert box in holders and obs["agent_0"]["last_success"] == obs["agent_1"]["last_success"] == 1


def test_rewards_share_team_progress_and_credit_the_actor() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0, observability="full", reward_sharing=0.5)
    env.reset()
    world = env.world
    atom = env.episode.checklist[0]
    index = world.index_of[atom.subject]
    fridge = next(s for s in world.specs if s.object_type == "Fridge")
    world.update(fridge.index, is_open=True, openness=1.0)
    world.update(index, parent=-1, holder=0)
    world.move_agent(0, world.agents[0]._replace(held=index))
    pose = interaction_poses(world, 0, fridge.index)[0]
    env.controller.step(
        action="Teleport",
        position={"x": pose.i * 0.25, "z": pose.j * 0.25},
        rotation=pose.rotation,
        horizon=pose.horizon,
        agentId=0,
    )
    n_atoms = len(env.episode.checklist)
    _, rewards, *_ = env.step({"agent_0": f"put {fridge.object_id}", "agent_1": "wait"})
    assert rewards["agent_0"] == pytest.approx(0.5 * 1 / n_atoms + 0.5 * 1 / n_atoms)
    assert rewards["agent_1"] == pytest.approx(0.5 * 1 / n_atoms)
    assert [(e["agent"], e["satisfied"]) for e in env.recorder.trace["atoms"]] == [
        ("agent_0", True)
    ]


def test_every_agent_choosing_done_ends_the_episode() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0)
    env.reset()
    _, _, terms, truncs, infos = env.step({"agent_0": "done", "agent_1": "done"})
    assert terms == {"agent_0": True, "agent_1": True} and not any(truncs.values())
    assert env.agents == [] and infos["agent_0"]["trace"]["final"]["success"] is False
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_the_tick_limit_truncates() -> None:
    env = make_env("switch_off_bathroom_v0", n_agents=1, seed=0)
    env.reset()
    truncated = False
    while env.agents:
        _, _, _, truncs, _ = env.step({"agent_0": "wait"})
        truncated = truncs.get("agent_0", truncated)
    assert truncated and env.tick <= env.task.max_ticks


def test_the_primitive_action_level_takes_thor_actions() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0, action_level="primitive")
    env.reset()
    obs, *_ = env.step({"agent_0": "RotateLeft", "agent_1": "MoveAhead"})
    assert obs["agent_0"]["last_success"] == 1 and env.tick == 1
    obs, *_ = env.step({"agent_0": "Fly", "agent_1": "PickupObject Nothing|1|2|3"})
    assert obs["agent_0"]["last_success"] == 0 and obs["agent_1"]["last_success"] == 0


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="valid options"):
        make_env(TRANSPORT, colour="red")
    with pytest.raises(ValueError, match="observability"):
        make_env(TRANSPORT, observability="psychic")
    with pytest.raises(ValueError, match="takes 2-8 agents"):
        make_env("heavy_box_sofa_v0", n_agents=1)


def test_a_message_to_an_unknown_recipient_fails_with_feedback_and_is_not_lost_silently() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0)
    env.reset()
    obs, *_ = env.step(_idle(env, agent_0="wait | say agent_7: hello"))
    assert obs["agent_0"]["last_success"] == 0
    assert (
        "no agent 'agent_7'" in obs["agent_0"]["feedback"]
        and "agent_1" in obs["agent_0"]["feedback"]
    )
    obs, *_ = env.step(_idle(env, agent_0="wait | say agent_0: note to self"))
    assert "yourself" in obs["agent_0"]["feedback"]
    assert env.postbox.log == []


def _rewards_of_oracle_episode(success_bonus: float) -> tuple[list[dict], bool]:
    from benchmark.agents import make_team

    env = make_env(TRANSPORT, n_agents=2, seed=0, observability="full", success_bonus=success_bonus)
    env.reset()
    team = make_team("oracle")
    obs, _ = env.reset(seed=0)
    team.reset(list(env.possible_agents), env.task_info())
    steps, infos = [], {}
    while env.agents:
        obs, rewards, _, _, infos = env.step(team.act(obs))
        steps.append(rewards)
    return steps, infos["agent_0"]["trace"]["final"]["success"]


def test_the_success_bonus_is_paid_to_every_agent_on_the_completing_step() -> None:
    with_bonus, solved = _rewards_of_oracle_episode(success_bonus=1.0)
    without, _ = _rewards_of_oracle_episode(success_bonus=0.0)
    assert solved and len(with_bonus) == len(without), "the bonus does not change the play"
    for a in ("agent_0", "agent_1"):
        assert with_bonus[-1][a] - without[-1][a] == pytest.approx(1.0)
        assert [s[a] for s in with_bonus[:-1]] == pytest.approx([s[a] for s in without[:-1]])


def test_reset_options_override_one_episode_and_unknown_ones_are_ignored_with_a_warning() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0)
    env.reset(seed=0, options={"comm": False, "scene": "FloorPlan2"})
    assert env.episode.scene == "FloorPlan2" and env.options.comm is False
    obs, *_ = env.step(_idle(env, agent_0="wait | say agent_1: hello"))
    assert obs["agent_1"]["messages"] == ()
    env.reset(seed=0)
    assert env.options.comm is True, "options last one episode"
    with pytest.warns(UserWarning, match=r"unknown option\(s\) \['colour'\] ignored; valid"):
        env.reset(seed=0, options={"colour": "red"})
    assert env.options == env.base_options


def test_a_pickup_of_an_object_another_agent_holds_names_the_holder() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0, observability="full")
    env.reset()
    world = env.world
    index = world.index_of[env.episode.checklist[0].subject]
    world.update(index, parent=-1, holder=1)
    world.move_agent(1, world.agents[1]._replace(held=index))
    oid = world.specs[index].object_id
    obs, *_ = env.step({"agent_0": f"pickup {oid}", "agent_1": "wait"})
    assert obs["agent_0"]["failure"] == {
        "reason": "held_by_other",
        "permanent": 0,
        "agent": "agent_1",
    }
    assert "held by agent 1" in obs["agent_0"]["feedback"]


def test_on_tick_sees_the_world_after_every_tick() -> None:
    env = make_env(TRANSPORT, n_agents=2, seed=0, message_cost=2)
    env.reset()
    seen: list[int] = []
    env.step(
        {"agent_0": "wait | say all: hi", "agent_1": "done"}, on_tick=lambda w: seen.append(w.tick)
    )
    assert seen == [1, 2, 3] and env.tick == 3
