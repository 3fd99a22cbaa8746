"""The play pages in a real headless Chromium (Debian's ``chromium``, driven by Playwright): a
scripted person plays ``agent_0`` of a whole episode beside a heuristic partner to success,
choosing what the heuristic would choose for that agent from the page's own select and message
box, and the written trace replays with ``human`` among its members; a stale form and malformed
ones are refused with a message and the form shown again; two people in two browsers play two
agents of one episode, which advances only once both have posted.

Screenshots are written to ``outputs/play/`` (ignored by git), for a person to look at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.browser import CHROMIUM_ARGS, chromium
from helpers.play_server import seat_url, serving
from playwright.sync_api import Browser, Page, sync_playwright

from baselines.heuristic.team import HeuristicTeam
from benchmark.env.replay import replay
from benchmark.play.session import PlaySession

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "outputs" / "play"
TASK = "transport_apple_fridge_v0"
VIEWPORT = {"width": 1400, "height": 1000}


def _shot(page: Page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _tick(page: Page) -> int:
    return int(page.locator("#tick").inner_text())


def _decide(page: Page, action: str, to: str = "", message: str = "", shot: str = "") -> None:
    """Choose ``action`` in the page's select (it must be one of its options), write the
    message, screenshot the filled page as ``shot`` if given, and post the form."""
    page.select_option("#action", value=action)
    if message:
        page.select_option("#to", value=to)
        page.fill("#message", message)
    if shot:
        _shot(page, shot)
    with page.expect_navigation():
        page.click("#submit")


def test_a_person_plays_a_whole_episode_to_success(browser: Browser, tmp_path: Path) -> None:
    session = PlaySession(TASK, n_agents=2, seed=0, humans=["agent_0"], out_dir=tmp_path)
    person = HeuristicTeam()
    person.reset(["agent_0"], session.info)
    page = browser.new_page(viewport=VIEWPORT)
    with serving(session) as base:
        page.goto(seat_url(base, session, "agent_0"))
        decisions, shot = 0, ""
        while page.locator("#done").count() == 0:
            assert page.locator("#decide").count() == 1, page.content()
            assert _tick(page) == session.tick
            line = person.act({"agent_0": session.observation("agent_0")})["agent_0"]
            action, _, say = line.partition(" | say ")
            to, _, text = say.partition(":")
            # The page as a person sees it mid-episode: messages received, one being written.
            if not shot and text and session.seats["agent_0"].messages:
                shot = "seat"
                _decide(page, action, to.strip(), text.strip(), shot)
            else:
                _decide(page, action, to.strip(), text.strip())
            assert page.locator("#error").count() == 0, page.locator("#error").inner_text()
            decisions += 1
            assert decisions <= 40, "the episode should have ended at its decision limit"
        assert "success" in page.locator("#done").inner_text()
        assert shot, "no decision both had messages received and sent one"
        _shot(page, "done")
        assert page.locator("#decide").count() == 0
    assert session.row is not None and session.row["SR"] == 1.0
    trace = json.loads(session.trace_path.read_text())
    assert trace["members"] == {"agent_0": "human", "agent_1": "heuristic"}
    assert replay(trace).ok
    rows = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [r["members"]["agent_0"] for r in rows] == ["human"]
    assert rows[0]["trace_hash"] == trace["trace_hash"]


def test_stale_and_malformed_posts_are_refused(browser: Browser) -> None:
    session = PlaySession(TASK, n_agents=2, seed=2, humans=["agent_0"])
    with serving(session) as base:
        url = seat_url(base, session, "agent_0")
        old, new = browser.new_page(viewport=VIEWPORT), browser.new_page(viewport=VIEWPORT)
        old.goto(url)
        new.goto(url)
        _decide(new, "explore")
        assert session.tick > 0
        # The first tab's form is for tick 0: posting it is refused, the form shown again.
        with old.expect_navigation() as nav:
            old.click("#submit")
        assert nav.value.status == 409
        assert "stale" in old.locator("#error").inner_text()
        assert _tick(old) == session.tick
        assert old.locator("input[name=tick]").input_value() == str(session.tick)
        _shot(old, "stale")
        # An action the select never offered (the page altered by hand) is refused.
        old.evaluate(
            "() => { const s = document.querySelector('#action');"
            " s.options[0].value = 'fly Moon'; s.selectedIndex = 0; }"
        )
        tick = session.tick
        with old.expect_navigation() as nav:
            old.click("#submit")
        assert nav.value.status == 422
        assert "'fly Moon' is not a valid action" in old.locator("#error").inner_text()
        assert session.tick == tick
        # A message over the token cap (the browser's own check switched off) is refused, and
        # the form keeps the text.
        too_long = " ".join(f"w{k}" for k in range(40))
        old.evaluate("() => { document.querySelector('#decide').noValidate = true; }")
        old.fill("#message", too_long)
        with old.expect_navigation() as nav:
            old.click("#submit")
        assert nav.value.status == 422
        assert "40 words; the cap is 32" in old.locator("#error").inner_text()
        assert old.locator("#message").input_value() == too_long
        assert session.tick == tick
        # A seat nobody holds is a 404 page.
        assert old.goto(f"{base}/seat/not-a-token").status == 404


def test_two_people_in_two_tabs_play_two_agents(browser: Browser) -> None:
    session = PlaySession(
        TASK, n_agents=3, seed=0, humans=["agent_0", "agent_1"], partners="heuristic"
    )
    assert session.team.members() == {
        "agent_0": "human",
        "agent_1": "human",
        "agent_2": "heuristic",
    }
    with serving(session) as base:
        first = browser.new_context(viewport=VIEWPORT).new_page()
        second = browser.new_context(viewport=VIEWPORT).new_page()
        first.goto(seat_url(base, session, "agent_0"))
        second.goto(seat_url(base, session, "agent_1"))
        for round_ in range(3):
            assert session.waiting_for() == ["agent_0", "agent_1"]
            tick = session.tick
            first.wait_for_selector("#decide")
            assert _tick(first) == tick
            say = "hello agent_1" if round_ == 0 else ""
            _decide(first, "wait", "agent_1" if say else "", say)
            assert session.tick == tick, "the episode must wait for agent_1"
            assert "Waiting for agent_1" in first.locator("#waiting").inner_text()
            second.wait_for_selector("#decide")
            assert _tick(second) == tick
            _decide(second, "wait")
            assert session.tick > tick
            # The waiting page reloads itself onto the next decision.
            first.wait_for_selector("#decide", timeout=15_000)
            assert _tick(first) == session.tick
        assert "hello agent_1" in second.locator("#messages").inner_text()
        _shot(second, "two-seats")
    trace = session.env.recorder.trace
    assert trace["members"]["agent_1"] == "human"
    waits = [d["actions"] for d in trace["decisions"][:3]]
    assert all(a["agent_0"].startswith("wait") and a["agent_1"] == "wait" for a in waits)
