"""The LLM agents' memory (baselines.llm_agents.memory) and the prompt that shows it
(llm_agents_v4): the teacher's decisions can be read from it, on real heuristic episodes in the
embedded simulator."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from baselines.heuristic.memory import CLAIM_TTL
from baselines.llm_agents import LLMAgentsTeam
from baselines.llm_agents.handles import Handles
from baselines.llm_agents.memory import AgentMemory
from baselines.rl.recipes.view_check import ViewChecker, check_views
from benchmark.env import CollabEnv, EnvOptions
from benchmark.rollout import run_episode
from benchmark.tasks.goals import parse_clause

APPLE = "Apple|+01.30|+00.98|+00.02"
FRIDGE = "Fridge|-02.80|+00.00|+04.43"
CABINET = "Cabinet|-01.00|+02.00|+01.00"
DRAWER = "Drawer|+00.50|+00.80|+01.00"


def _obs(tick: int, visible: list[tuple[str, str, str, float]], **kw: Any) -> dict[str, Any]:
    return {
        "tick": tick,
        "holding": kw.get("holding", ""),
        "visible": [
            {"objectId": o, "state": state, "in": inside, "distance": d}
            for o, state, inside, d in visible
        ],
        "messages": kw.get("messages", []),
        "last_action": kw.get("last_action", ""),
        "last_success": 1,
        "failure": {"reason": "", "permanent": 0, "agent": ""},
    }


def _memory() -> AgentMemory:
    return AgentMemory("agent_0", [parse_clause("all: inside(Apple, Fridge)")], Handles())


def test_a_container_is_searched_once_opened_or_reported_and_claims_expire() -> None:
    memory = _memory()
    memory.observe(
        _obs(
            1,
            [
                (CABINET, "closed", "", 1.0),
                (DRAWER, "closed", "", 0.5),
                (FRIDGE, "closed", "", 3.0),
            ],
        )
    )
    # In sight first, then by objectId: the order the teacher takes them in.
    assert memory.unsearched() == [CABINET, DRAWER, FRIDGE]
    memory.acted(f"open {CABINET} | say all: searched {CABINET}")
    memory.observe(_obs(2, [], messages=[{"sender": "agent_1", "text": f"searched {DRAWER}"}]))
    assert memory.unsearched() == [FRIDGE]
    assert memory.searched == {CABINET: "agent_0", DRAWER: "agent_1"}
    memory.observe(_obs(3, [], messages=[{"sender": "agent_1", "text": f"claim {FRIDGE}"}]))
    assert memory.unsearched() == [] and "claimed by agent_1" in memory.view()
    memory.observe(_obs(4 + CLAIM_TTL, []))
    assert memory.unsearched() == [FRIDGE] and "claimed by" not in memory.view()


def test_the_view_names_goal_objects_where_they_are_and_what_it_heard() -> None:
    memory = _memory()
    found = {"sender": "agent_1", "text": f"found {APPLE} in {FRIDGE}"}
    memory.observe(_obs(5, [(FRIDGE, "closed", "", 2.0)], messages=[found], last_action="explore"))
    view = memory.view()
    assert view.splitlines()[0] == "Tick 5. You hold: nothing. Last: explore -> ok"
    assert "Goal objects: Apple (in Fridge)" in view
    assert "Not searched: Fridge (in sight, closed)" in view  # a closed container
    assert "Heard: agent_1: found Apple in Fridge" in view
    assert "|" not in view  # objects by handle, never by objectId


def test_llm_agents_v4_prompts_with_the_memory_and_v3_keeps_its_own_view() -> None:
    env = CollabEnv(
        "transport_produce_fridge_v0",
        n_agents=2,
        options=EnvOptions(split="train", observability="partial", comm=True),
    )
    obs, _ = env.reset(seed=0)
    v3, v4 = LLMAgentsTeam(llm=None), LLMAgentsTeam(llm=None, prompt="llm_agents_v4")
    for team in (v3, v4):
        team.start(env.agents, env.task_info())
        team.observe("agent_0", obs["agent_0"])
    memory_prompt = v4.chat("agent_0", obs["agent_0"])[-1]["content"]
    assert memory_prompt.startswith("Tick 0. You hold: nothing.")
    assert "Goal objects:" in memory_prompt and "Recent history" not in memory_prompt
    assert "Recent history" in v3.chat("agent_0", obs["agent_0"])[-1]["content"]
    assert v3.memory["agent_0"].seen == {}  # v3 keeps no memory: its handles are as before


def test_the_teachers_decisions_can_be_read_from_the_memory_prompt() -> None:
    figures = check_views(
        ["transport_produce_fridge_v0", "search_produce_kitchen_v0"], 4, "train", 0, tokens=False
    )
    # The v3 prompt hides what the heuristic decides from; the memory prompt shows it.
    assert figures["v3"]["explore_beside_unsearched"] > 0.2
    assert figures["v3"]["target_absent"] > 0.0
    assert figures["memory"]["explore_beside_unsearched"] == 0.0
    assert figures["memory"]["target_absent"] < 0.02
    assert figures["decisions_per_episode"] > 10


def test_a_rearrangement_home_seen_or_heard_is_shown_with_its_object() -> None:
    bread, mug = "Bread|+01.62|+00.98|+00.76", "Mug|+00.10|+00.90|+00.20"
    counter, shelf = "CounterTop|+00.99|+00.95|+01.02", "Shelf|+02.00|+01.00|+00.50"
    goal = [parse_clause("all: inside(Bread, @home)"), parse_clause("all: inside(Mug, @home)")]
    memory = AgentMemory("agent_0", goal, Handles())
    obs = _obs(3, [(counter, "", "", 1.0), (bread, "", "", 2.0)])
    obs["visible"][0]["belongs"] = [bread]  # the counter is where the bread belongs
    memory.observe(obs)
    memory.observe(_obs(4, [], messages=[{"sender": "agent_1", "text": f"home {mug} in {shelf}"}]))
    view = memory.view()
    assert "Bread (in sight, belongs in CounterTop)" not in view  # no longer in sight
    assert "Bread (belongs in CounterTop)" in view
    assert "Mug (belongs in Shelf)" in view


# sha256 of the llm_agents_v4 chats (system and user message) of the episodes below, as JSON.
PINNED_PROMPTS = "57495a460efae314a9ddb4a37738a3fa85ae01716ce555f5a814c3df07c1343c"


def test_the_memory_prompts_of_fixed_episodes_are_unchanged_to_the_character() -> None:
    """Trained adapters read these prompts: at every decision of the heuristic team in three
    fixed episodes (homes, a joint lift, three agents claiming), the prompt llm_agents_v4 writes
    is the one they were trained on."""
    checker = ViewChecker()
    episodes = (
        ("rearrange_kitchen_v0", 2),
        ("heavy_cookware_sink_v0", 2),
        ("transport_produce_fridge_v0", 3),
    )
    for task, n in episodes:
        options = EnvOptions(split="train", observability="partial", comm=True)
        run_episode(CollabEnv(task, n_agents=n, options=options), checker, seed=0)
    chats = checker.prompts["memory"]
    assert len(chats) == 272
    assert hashlib.sha256(json.dumps(chats).encode()).hexdigest() == PINNED_PROMPTS
