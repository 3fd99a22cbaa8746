"""The leaderboard's pages in a real headless Chromium (Debian's ``chromium``, driven by
Playwright) against the real server: sort a track's table, open an entry, see its plot and
replay GIFs load, and find a ``<script>`` team name shown as text, never run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from tests.helpers.lb_server import Server

SEED = Path(__file__).resolve().parents[1] / "leaderboard" / "seed" / "smoke"
EVIL = '<script>document.title="owned";alert(1)</script>'
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Debian's chromium is needed by the browser test: `make browser` installs it")
    return found


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


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


def _column(page: Page, cls: str) -> list[str]:
    return page.locator(f"table.board tbody td.{cls}").all_inner_texts()


def test_sort_open_an_entry_see_its_plot_and_replays_and_the_script_team_escaped(
    board: Server, page: Page, tmp_path: Path
) -> None:
    dialogs: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)

    page.goto(f"{board.url}/")
    page.get_by_role("link", name="smoke-v1.n2.comm-on.partial.skill").click()
    page.wait_for_url("**/tracks/smoke-v1.n2.comm-on.partial.skill")
    assert sorted(_column(page, "team")) == sorted(["reference", "reference", EVIL])

    page.locator("table.board thead a", has_text="team").click()
    ascending = _column(page, "team")
    assert ascending == sorted(ascending) and "sort=team" in page.url
    page.locator("table.board thead a", has_text="team").click()
    assert _column(page, "team") == sorted(ascending, reverse=True)

    page.locator("table.board thead a", has_text="rank").click()
    ranks = [int(r) for r in _column(page, "rank")]
    assert ranks == sorted(ranks)

    row = page.locator("table.board tbody tr", has_text="heuristic")
    assert row.locator("td.team").inner_text() == EVIL
    row.locator("td.method a").click()
    page.wait_for_url("**/entries/*")
    assert page.locator("h1 .team").inner_text() == EVIL
    assert page.title() != "owned" and dialogs == []
    assert page.locator("script").count() == 0

    images = page.locator("img")
    assert images.count() >= 2
    plot = page.locator('img[src$="/plot.png"]')
    gifs = page.locator('img[src$=".gif"]')
    assert plot.count() == 1 and gifs.count() >= 1
    page.wait_for_load_state("networkidle")
    for image in [plot, *gifs.all()]:
        loaded = image.evaluate("img => img.complete && img.naturalWidth > 0")
        assert loaded, image.get_attribute("src")
    assert page.locator("a", has_text="download the bundle").count() == 1

    shot = tmp_path / "entry.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert failed == [] and errors == [], (failed, errors)
