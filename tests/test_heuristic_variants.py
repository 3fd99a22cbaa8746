"""The heuristic team's behaviour options (baselines/heuristic/style.py), on real episodes: each
changes the agent's play the way it says (a no-op option fails its test), and a value an
option does not take is refused naming the option. That the defaults play as before is what
the committed traces check (tests/test_replay_and_checks.py, tests/test_paper_reference.py)."""

from __future__ import annotations

import pytest

from baselines.heuristic import HeuristicAgent, HeuristicTeam
from baselines.heuristic.style import first_container
from benchmark.agents import make_team
from benchmark.agents.mixed import MixedTeam
from benchmark.env import make_env
from benchmark.rollout import run_episode
from benchmark.tasks.goals import parse_clause

SEARCH = "search_produce_kitchen_v0"
TRANSPORT = "transport_produce_fridge_v0"
CLAIM_TTL = 40


def _team(task: str, seed: int, comm: bool = True, **options) -> dict:
    env = make_env(task, n_agents=2, seed=seed, comm=comm)
    return run_episode(env, make_team("heuristic", **options), seed=seed)


def _partner(task: str, seed: int, **options) -> dict:
    """agent_0 the usual heuristic, agent_1 the heuristic with ``options``."""
    members = [
        {"agents": [0], "baseline": "heuristic"},
        {"baseline": "heuristic", "kwargs": options},
    ]
    env = make_env(task, n_agents=2, seed=seed)
    return run_episode(env, MixedTeam(members), seed=seed)


def _actions(trace: dict, agent: str) -> list[str]:
    return [s["actions"][agent] for s in trace["decisions"] if agent in s["actions"]]


def _senders(trace: dict, agent: str) -> list[str]:
    return [m["text"] for m in trace["messages"] if m["sender"] == agent]


def _found_types(trace: dict) -> set[str]:
    return {t.split()[1].split("|")[0] for t in _senders(trace, "agent_1") if t[:6] == "found "}


def test_a_silent_agent_sends_no_message() -> None:
    usual, silent = _partner(TRANSPORT, 0), _partner(TRANSPORT, 0, silent=True)
    assert _senders(usual, "agent_1"), "the usual agent_1 talks in this episode"
    assert _senders(silent, "agent_1") == []
    assert not any(" | say " in a for a in _actions(silent, "agent_1"))
    assert _senders(silent, "agent_0"), "its partner still talks"


def test_a_chatty_agent_talks_at_every_decision_and_reports_what_no_goal_needs() -> None:
    usual, chatty = _partner(TRANSPORT, 0), _partner(TRANSPORT, 0, chatty=True)
    assert len(_senders(chatty, "agent_1")) > len(_senders(usual, "agent_1"))
    actions = _actions(chatty, "agent_1")
    first = next(k for k, a in enumerate(actions) if " | say " in a)
    assert all(" | say " in a for a in actions[first:]), "once it has spoken it always speaks"
    assert _found_types(chatty) - _found_types(usual), "it reports objects no goal needs"


def test_a_chatty_agent_repeats_its_news_but_not_its_claims() -> None:
    chatty, usual = HeuristicTeam(chatty=True), HeuristicTeam()
    goal = [parse_clause("all: inside(Apple, Fridge)")]
    said = {}
    for name, team in (("chatty", chatty), ("usual", usual)):
        herald = HeuristicAgent("agent_0", goal, ["agent_0"], team.style).herald
        herald.say("found Apple|+01|+01|+00")
        herald.say_first("claim Apple|+01|+01|+00")
        herald.say("searched Drawer|+02|+01|+00")
        said[name] = [herald.attach("explore").partition(": ")[2] for _ in range(6)]
    news = ["claim Apple|+01|+01|+00", "found Apple|+01|+01|+00", "searched Drawer|+02|+01|+00"]
    assert said["usual"] == [*news, "", "", ""]
    again = ["found Apple|+01|+01|+00", "searched Drawer|+02|+01|+00", "found Apple|+01|+01|+00"]
    assert said["chatty"] == [*news, *again]


@pytest.mark.parametrize("order", ["reversed", "farthest"])
def test_another_explore_order_searches_the_containers_in_another_order(order: str) -> None:
    def searched(trace: dict) -> list[str]:
        return [s["target"] for s in trace["skills"] if s["skill"] == "open"]

    differs = [
        searched(_team(SEARCH, seed)) != searched(_team(SEARCH, seed, explore_order=order))
        for seed in (0, 3)
    ]
    assert all(differs), differs


def test_first_container_follows_the_order() -> None:
    near, far, other = "Cabinet|+01|+01|+00", "Drawer|+05|+01|+00", "Box|+02|+00|+00"
    closed, pose = [near, far, other], (0.0, 0.0)
    assert first_container(closed, set(), pose, "default") == other  # by objectId
    assert first_container(closed, set(), pose, "reversed") == far
    assert first_container(closed, set(), pose, "farthest") == far
    assert first_container(closed, {near, other}, pose, "reversed") == near  # in view first
    assert first_container(closed, {near, other}, pose, "farthest") == other


def test_a_slow_agent_waits_after_every_action() -> None:
    k = 2
    trace = _team(TRANSPORT, 0, slow=k)
    for agent in ("agent_0", "agent_1"):
        words = [a.split(" | ")[0] for a in _actions(trace, agent)]
        acted = [i for i, w in enumerate(words) if w != "wait"]
        assert len(acted) >= 3, words
        for i in acted:
            after = words[i + 1 : i + 1 + k]
            assert after == ["wait"] * len(after), (agent, i, words[i : i + k + 1])
    usual = [a.split(" | ")[0] for a in _actions(_team(TRANSPORT, 0), "agent_0")]
    assert usual.count("wait") < len(usual) // 3


@pytest.mark.parametrize(("task", "seed"), [(SEARCH, 0), (TRANSPORT, 0)])
def test_deaf_agents_play_as_if_no_message_reached_them(task: str, seed: int) -> None:
    """Deaf agents with messages delivered decide exactly as hearing agents to whom none is
    delivered, and not as hearing agents to whom they are."""
    deaf = _team(task, seed, deaf=True)
    assert any(m["delivered"] for m in deaf["messages"])
    assert deaf["decisions"] == _team(task, seed, comm=False)["decisions"]
    assert deaf["decisions"] != _team(task, seed)["decisions"]


def _claimed_pursuits(trace: dict) -> int:
    """agent_1's decisions about an object agent_0 claimed by message (heard, not lapsed, not
    delivered since)."""
    claims: dict[str, int] = {}
    pursuits = 0
    for step in trace["decisions"]:
        tick = step["tick"]
        for m in trace["messages"]:
            if m["tick"] < tick - 1 and m["sender"] == "agent_0" and m["text"][:6] == "claim ":
                claims[m["text"][6:]] = max(claims.get(m["text"][6:], -1), m["tick"])
            if m["tick"] < tick and m["text"][:5] == "done ":
                claims.pop(m["text"][5:], None)
        action = step["actions"].get("agent_1", "").split(" | ")[0]
        target = action.partition(" ")[2]
        pursuits += target in claims and tick - claims[target] <= CLAIM_TTL
    return pursuits


def test_a_greedy_agent_goes_for_objects_its_partner_claimed() -> None:
    episodes = [(SEARCH, 2), (TRANSPORT, 3)]
    assert not any(_claimed_pursuits(_partner(t, s)) for t, s in episodes)
    assert any(_claimed_pursuits(_partner(t, s, greedy_nearest=True)) for t, s in episodes)


def test_a_greedy_agent_takes_the_nearest_object_first() -> None:
    near, far = "Apple|-00.50|+01.00|+00.00", "Apple|+05.00|+01.00|+00.00"  # far sorts first
    obs = {
        "tick": 0,
        "needs_decision": 1,
        "pose": (-0.5, 0.5, 0.0, 0.0),
        "visible": [
            {"objectId": oid, "objectType": "Apple", "state": "", "in": ""} for oid in (near, far)
        ],
        "holding": "",
        "messages": (),
        "last_success": 1,
        "feedback": "",
        "failure": {"reason": "", "permanent": 0, "agent": ""},
    }
    goal = [parse_clause("all: inside(Apple, Fridge)")]
    for greedy, wanted in ((False, far), (True, near)):
        team = HeuristicTeam(greedy_nearest=greedy)
        agent = HeuristicAgent("agent_0", goal, ["agent_0"], team.style)
        agent.observe(obs)
        assert agent.decide(obs).startswith(f"pickup {wanted}"), greedy


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"explore_order": "sideways"}, "explore_order='sideways' must be one of"),
        ({"slow": -1}, "slow=-1"),
        ({"slow": True}, "slow=True"),
        ({"slow": 1.5}, "slow=1.5"),
        ({"silent": "yes"}, "silent='yes' must be true or false"),
        ({"deaf": 1}, "deaf=1 must be true or false"),
        ({"silent": True, "chatty": True}, "silent and chatty exclude each other"),
    ],
)
def test_a_value_an_option_does_not_take_is_refused_naming_it(options: dict, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        make_team("heuristic", **options)


def test_an_unknown_option_is_refused_naming_it() -> None:
    with pytest.raises(TypeError, match="loud"):
        make_team("heuristic", loud=True)
