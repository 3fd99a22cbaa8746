"""The play session without a browser: the valid actions are the LLM agents' decision grammar,
forms are taken or refused as they should be, a heuristic "person" plays an episode to success
and its trace replays with ``human`` among its members, the seat's map shows what it has seen,
and ``python -m benchmark.play`` serves the pages it prints."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from baselines.heuristic.team import HeuristicTeam
from baselines.llm_agents.team import decision_schema
from benchmark.env.replay import replay
from benchmark.play.__main__ import parse_args
from benchmark.play.choices import Choice, FormError, StaleForm, seat_skills, valid_actions
from benchmark.play.session import PlaySession
from benchmark.play.view import PIXELS_PER_METRE, SightMap, checklist
from benchmark.sim.render import _FLOOR as FLOOR
from benchmark.sim.render import top_down

TASK = "transport_apple_fridge_v0"
APPLE = "Apple|-00.47|+01.15|+00.48"


def test_valid_actions_are_the_llm_agents_grammar() -> None:
    objects = [APPLE, "Fridge|-02.10|+00.00|+01.07"]
    for cannot, holding in [((), False), ((), True), (("slice", "lift"), False)]:
        skills = seat_skills(cannot, holding)
        assert ("put" in skills) == holding and ("pickup" in skills) != holding
        assert not set(cannot) & set(skills)
        schema = decision_schema(skills, objects)
        assert valid_actions(skills, objects) == schema["properties"]["action"]["enum"]


def test_a_choice_takes_valid_forms_and_refuses_the_rest() -> None:
    choice = Choice((f"pickup {APPLE}", "explore"), ("all", "agent_1"), token_cap=3)
    assert choice.decision({"action": "explore"}) == "explore"
    line = choice.decision({"action": "explore", "to": "agent_1", "message": " found  an apple "})
    assert line == "explore | say agent_1: found an apple"
    refusals = {
        "choose an action": {"action": ""},
        "'fly' is not a valid action": {"action": "fly"},
        "no recipient 'agent_7'": {"action": "explore", "to": "agent_7", "message": "hi"},
        "4 words; the cap is 3": {"action": "explore", "message": "one two three four"},
        "printable ASCII": {"action": "explore", "message": "caf\u00e9 \u2603"},
    }
    for words, form in refusals.items():
        with pytest.raises(FormError, match=words):
            choice.decision(form)
    silent = Choice(("explore",), (), token_cap=3)
    with pytest.raises(FormError, match="not delivered"):
        silent.decision({"action": "explore", "message": "hi"})


def _play(session: PlaySession, agent: str = "agent_0") -> int:
    """Play ``agent`` as the heuristic would, through forms; the number of decisions."""
    person = HeuristicTeam()
    person.reset([agent], session.info)
    decisions = 0
    while not session.over:
        assert session.waiting_for() == [agent]
        line = person.act({agent: session.observation(agent)})[agent]
        action, _, say = line.partition(" | say ")
        assert action in session.choice(agent).actions
        to, _, text = say.partition(":")
        form = {"tick": str(session.tick), "action": action, "to": to.strip(), "message": text}
        assert session.post(agent, form) == line
        decisions += 1
    return decisions


def test_a_heuristic_person_plays_to_success_and_the_trace_replays(tmp_path: Path) -> None:
    session = PlaySession(TASK, n_agents=2, seed=2, humans=["agent_0"], out_dir=tmp_path)
    assert _play(session) > 3
    assert session.row["SR"] == 1.0
    assert session.row["members"] == {"agent_0": "human", "agent_1": "heuristic"}
    trace = json.loads(session.trace_path.read_text())
    assert trace == session.trace and replay(trace).ok
    with pytest.raises(StaleForm, match="episode is over"):
        session.post("agent_0", {"tick": str(session.tick), "action": "explore"})


def test_stale_untimely_and_malformed_forms_are_refused() -> None:
    session = PlaySession(TASK, n_agents=3, seed=0, humans=["agent_0", "agent_1"])
    with pytest.raises(FormError, match="no valid tick"):
        session.post("agent_0", {"action": "wait"})
    with pytest.raises(FormError, match="not a valid action"):
        session.post("agent_0", {"tick": "0", "action": f"pickup {APPLE}x"})
    assert session.post("agent_0", {"tick": "0", "action": "wait"}) == "wait"
    with pytest.raises(StaleForm, match="already decided at tick 0"):
        session.post("agent_0", {"tick": "0", "action": "wait"})
    assert session.tick == 0 and session.waiting_for() == ["agent_1"]
    session.post("agent_1", {"tick": "0", "action": "explore"})
    assert session.tick > 0
    with pytest.raises(StaleForm, match="form is for tick 0"):
        session.post("agent_0", {"tick": "0", "action": "wait"})
    if not session.observation("agent_1")["needs_decision"]:
        with pytest.raises(StaleForm, match="still busy"):
            session.post("agent_1", {"tick": str(session.tick), "action": "wait"})


def test_sessions_refuse_bad_seats_and_take_member_lists() -> None:
    with pytest.raises(ValueError, match="humans must name agents"):
        PlaySession(TASK, n_agents=2, humans=["agent_5"])
    with pytest.raises(ValueError, match="action_level=skill"):
        PlaySession(TASK, n_agents=2, action_level="primitive")
    with pytest.raises(ValueError, match="played by members"):
        PlaySession(TASK, n_agents=2, partners=[{"baseline": "heuristic", "agents": ["agent_0"]}])
    session = PlaySession(
        TASK, n_agents=3, humans=["agent_1"], partners=[{"baseline": "random"}], seed=1
    )
    assert session.team.members() == {"agent_0": "random", "agent_1": "human", "agent_2": "random"}
    assert session.waiting_for() == ["agent_1"]


def _floor(image: Image.Image) -> int:
    """How many pixels of ``image`` are floor."""
    return int((np.asarray(image.convert("RGB")) == FLOOR).all(axis=-1).sum())


def test_the_map_shows_what_the_seat_has_seen_and_full_shows_everything() -> None:
    session = PlaySession(TASK, n_agents=2, seed=2)
    seen = Image.open(io.BytesIO(session.map_png("agent_0")))
    whole = top_down(session.env.world, pixels_per_metre=PIXELS_PER_METRE)
    assert seen.size == whole.size
    assert 0 < _floor(seen) < _floor(whole)
    assert [line.done for line in checklist(session.info)] == [None]
    sight, reachable = SightMap(session.env.world), sorted(session.env.world.scene.reachable)
    near = set(sight.update([reachable[0]]))
    assert near and sight.update([reachable[-1]]) > near  # standing elsewhere shows more floor
    assert sight.cells <= set(reachable)
    full = PlaySession(TASK, n_agents=2, seed=2, observability="full")
    lines = checklist(full.info)
    assert lines and all(line.done is False for line in lines)
    everything = Image.open(io.BytesIO(full.map_png("agent_0")))
    assert _floor(everything) == _floor(top_down(full.env.world, pixels_per_metre=PIXELS_PER_METRE))


def test_command_line_arguments() -> None:
    args = parse_args(["humans=agent_0,agent_1", "n_agents=3", "comm=false", "token_cap=8"])
    assert args["humans"] == ["agent_0", "agent_1"] and args["n_agents"] == 3
    assert args["comm"] is False and args["token_cap"] == 8
    assert parse_args(["humans=[agent_1]", "partners=[{baseline: oracle}]"])["partners"] == [
        {"baseline": "oracle"}
    ]
    with pytest.raises(SystemExit, match="bad argument 'colour=red'"):
        parse_args(["colour=red"])


def test_python_m_benchmark_play_serves_the_seats_it_prints(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmark.play", "seed=2", "port=0", f"out={tmp_path}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any(line.startswith("overview:") for line in lines):
            assert time.monotonic() < deadline and process.poll() is None, lines
            lines.append(process.stdout.readline())
        seat = next(line.split()[1] for line in lines if line.strip().startswith("agent_0:"))
        assert seat.startswith("http://127.0.0.1:") and "/seat/" in seat
        assert any(line.strip() == "agent_1: heuristic" for line in lines)
        page = httpx.get(seat, timeout=30)
        assert page.status_code == 200 and 'name="tick" value="0"' in page.text
        assert httpx.get(seat + "/map.png", timeout=30).content[:4] == b"\x89PNG"
        overview = httpx.get(seat.split("/seat/")[0] + "/", timeout=30).text
        assert "human" in overview and "heuristic" in overview and "/seat/" not in overview
    finally:
        process.terminate()
        process.wait(30)


def test_partners_play_on_alone_once_the_person_is_done() -> None:
    session = PlaySession(TASK, n_agents=2, seed=4)
    session.post("agent_0", {"tick": "0", "action": "done"})
    assert session.over and session.row["SR"] == 1.0  # the heuristic partner finished the task
    assert session.waiting_for() == []
    assert [d["actions"].get("agent_0") for d in session.trace["decisions"]][:2] == ["done", None]
