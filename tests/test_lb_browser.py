"""The leaderboard's pages in a real headless Chromium (Debian's ``chromium``, driven by
Playwright) against the real server: sort a track's table, open an entry, see its plot and
replay load, find a ``<script>`` team name shown as text, never run; the track table of a
crowded track fits a 1400 px page; a tied track says its entries cannot be told apart; the
replay of an episode past the first three shows its tick's picture, actions, messages and
checklist, and a bad episode or tick is a 404 or 422 page.

Screenshots of every page checked are written to ``outputs/lb_browser/`` (ignored by git), for
a person to look at after the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urljoin

import pytest
from helpers.browser import CHROMIUM_ARGS, chromium
from helpers.lb_board import PARTIAL, T0, submit_verified
from helpers.lb_server import Server
from playwright.sync_api import Locator, Page, sync_playwright

from leaderboard.server.db.session import open_database

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "leaderboard" / "data" / "smoke"
SHOTS = ROOT / "outputs" / "lb_browser"
EVIL = '<script>document.title="owned";alert(1)</script>'
PAGE_WIDTH = 1400
CROWD = 12  # entries on the crowded track


def _shot(page: Page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return path


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = Server(tmp_path_factory.mktemp("lb") / "data", workers=2).start()
    try:
        reference, evil = server.team("reference"), server.team(EVIL)
        submitted = [
            server.upload(reference, (SEED / "random-smoke-v1.tar.gz").read_bytes()),
            server.upload(reference, (SEED / "llm_planner-smoke-v1.tar.gz").read_bytes()),
            server.upload(evil, (SEED / "heuristic-smoke-v1.tar.gz").read_bytes()),
        ]
        for response in submitted:
            assert server.wait(response.json()["id"])["state"] == "verified"
        yield server
    finally:
        server.stop()


def _store_entry(data_dir: Path, sessions, k: int) -> None:
    """Entry ``k`` of the crowded track: a reference bundle's verified results under a team
    and method of realistic length, its traces salted so that each is an entry of its own."""
    submit_verified(
        sessions,
        data_dir,
        f"university-lab-{k:02d}-multiagent",
        ("heuristic", "random", "llm_planner", "oracle")[k % 4],
        track=PARTIAL,
        now=T0 + timedelta(hours=k),
        salt=f"crowd-{k}",
        method=f"hierarchical-planner-with-shared-memory-v{k}",
        model="Qwen2.5-7B-Instruct",
        llm_tokens=1_234_567 * (k + 1),
        wall_time_s=12_345.6 + k,
    )


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose track PARTIAL holds CROWD entries with long team and method names."""
    data_dir = tmp_path_factory.mktemp("crowded") / "data"
    data_dir.mkdir()
    sessions = open_database(f"sqlite:///{data_dir / 'leaderboard.sqlite3'}")
    for k in range(CROWD):
        _store_entry(data_dir, sessions, k)
    sessions.kw["bind"].dispose()
    server = Server(data_dir, workers=1).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": PAGE_WIDTH, "height": 900})
        finally:
            browser.close()


def _follow(page: Page, link: Locator) -> None:
    """Click ``link`` and wait until its page has loaded: reading the old page's table while
    the new one is on its way would compare against nothing."""
    target = urljoin(page.url, link.get_attribute("href"))
    link.click()
    page.wait_for_url(lambda url: url == target)


def _column(page: Page, cls: str) -> list[str]:
    return page.locator(f"table.board tbody td.{cls}").all_inner_texts()


def _watch(page: Page) -> tuple[list[str], list[str], list[str]]:
    """Dialogs opened, console errors and failed responses of ``page``, as they happen."""
    dialogs: list[str] = []
    errors: list[str] = []
    failed: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return dialogs, errors, failed


def _loaded(page: Page, selector: str) -> None:
    images = page.locator(selector)
    assert images.count() >= 1, selector
    page.wait_for_load_state("networkidle")
    for image in images.all():
        loaded = image.evaluate("img => img.complete && img.naturalWidth > 0")
        assert loaded, image.get_attribute("src")


def test_sort_open_an_entry_see_its_plot_and_replays_and_the_script_team_escaped(
    board: Server, page: Page
) -> None:
    dialogs, errors, failed = _watch(page)
    page.goto(f"{board.url}/")
    page.get_by_role("link", name="smoke-v1.n2.comm-on.partial.skill").click()
    page.wait_for_url("**/tracks/smoke-v1.n2.comm-on.partial.skill")
    assert sorted(_column(page, "team")) == sorted(["reference", "reference", EVIL])

    _follow(page, page.locator("table.board thead a", has_text="team"))
    ascending = _column(page, "team")
    assert ascending == sorted(ascending) and "sort=team" in page.url
    _follow(page, page.locator("table.board thead a", has_text="team"))
    assert _column(page, "team") == sorted(ascending, reverse=True)

    _follow(page, page.locator("table.board thead a", has_text="rank"))
    ranks = [int(r) for r in _column(page, "rank")]
    assert ranks == sorted(ranks)

    row = page.locator("table.board tbody tr", has_text="heuristic")
    assert row.locator("td.team").inner_text() == EVIL
    row.locator("td.method a").click()
    page.wait_for_url("**/entries/*")
    assert page.locator("h1 .team").inner_text() == EVIL
    assert page.title() != "owned" and dialogs == []
    assert page.locator("script").count() == 0

    _loaded(page, 'img[src$="/plot.png"]')
    _loaded(page, 'img[src$=".gif"]')
    assert page.locator("a", has_text="download the bundle").count() == 1
    assert page.locator("a.replay").count() == 6, "every run episode can be replayed"
    _shot(page, "entry")
    assert failed == [] and errors == [], (failed, errors)


def test_a_tied_track_says_its_entries_cannot_be_told_apart(board: Server, page: Page) -> None:
    page.goto(f"{board.url}/tracks/{PARTIAL}")
    note = page.locator("#not-separated")
    assert note.is_visible()
    text = " ".join(note.inner_text().split())
    assert "These 3 entries cannot be told apart" in text and "6 run episodes" in text
    assert "[0.00, 0.46]" in text
    assert "Clopper-Pearson 95%" in page.locator("p.note").first.inner_text()
    assert "every submission the team made" in page.locator("#attempts-note").inner_text()
    _shot(page, "track-tied")


def test_the_crowded_track_table_fits_a_1400_px_page(crowded: Server, page: Page) -> None:
    _, errors, failed = _watch(page)
    page.goto(f"{crowded.url}/tracks/{PARTIAL}")
    assert page.locator("table.board tbody tr").count() == CROWD
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PAGE_WIDTH, f"the page is {width} px wide"
    for cls in ("attempts", "reproductions", "date"):
        for cell in page.locator(f"table.board tbody td.{cls}").all():
            box = cell.bounding_box()
            assert box is not None and box["x"] + box["width"] <= PAGE_WIDTH, (cls, box)
            assert cell.inner_text().strip(), cls
    _shot(page, "track-crowded-1400")
    assert failed == [] and errors == [], (failed, errors)


def test_the_replay_of_a_later_episode_shows_its_ticks_actions_messages_and_checklist(
    board: Server, page: Page
) -> None:
    _, errors, failed = _watch(page)
    page.goto(f"{board.url}/tracks/{PARTIAL}")
    page.locator("table.board tbody tr", has_text="heuristic").locator("td.method a").click()
    page.wait_for_url("**/entries/*")
    entry_url = page.url
    page.locator("a.replay", has_text="replay 4").click()
    page.wait_for_url("**/episodes/4")
    _loaded(page, 'img[src$="/ticks/0.png"]')
    assert "tick 0 /" in page.locator(".tick-counter").inner_text()
    assert page.locator("li.agent").count() == 2
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PAGE_WIDTH, f"the replay page is {width} px wide"

    page.locator("p.tick-strip", has_text="messages sent").locator("a").first.click()
    page.wait_for_url("**/episodes/4?tick=*")
    tick = int(page.url.rsplit("=", 1)[1])
    _loaded(page, f'img[src$="/ticks/{tick}.png"]')
    assert page.locator(".tick-counter").inner_text().startswith(f"tick {tick} /")
    messages = page.locator("ul.messages li").all_inner_texts()
    assert messages and all("→" in m for m in messages)
    assert page.locator("li.agent code.said").count() >= 1, "the agents' decisions of the tick"
    count = page.locator("h2.checklist-count").inner_text()
    done = page.locator("ul.checklist li.done").count()
    total = page.locator("ul.checklist li").count()
    assert count == f"Checklist: {done} of {total} satisfied"
    _shot(page, "replay-episode-4")

    _follow(page, page.locator("nav.ticks a", has_text="last"))
    assert page.locator("ul.checklist li.done").count() >= done, "the checklist fills up"
    _loaded(page, 'img[src$=".gif"]')
    assert failed == [] and errors == [], (failed, errors)

    for suffix, status in (("/episodes/6", 404), ("/episodes/4?tick=99999", 404),
                           ("/episodes/4?tick=x", 422), ("/episodes/-1", 422)):  # fmt: skip
        answer = page.goto(entry_url + suffix)
        assert answer is not None and answer.status == status, suffix
        assert page.locator("p.message").is_visible(), suffix
    _shot(page, "replay-bad-tick")
