"""The board's pages on a board of real verified entries: tracks grouped by suite version, a
table sorted server-side through its header links that says when its entries cannot be told
apart, entry pages with the server's own plot, every episode's replay (a page per tick, drawn
from the verified traces), reproductions by other teams with what they add, what attempts
count, submission pages with their reasons, and every user-supplied string escaped; no page
holds a script or an inline style."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from helpers.lb_board import (
    FULL,
    OLD_FULL,
    PARTIAL,
    SCRIPT_TEAM,
    SEED,
    T0,
    Board,
    empty_board,
    make_board,
    submit_verified,
    verified,
)
from markupsafe import escape
from PIL import Image

from benchmark.media.viewer import checklist_states
from benchmark.sim.render import AGENT_COLOURS
from leaderboard.server import crud
from leaderboard.server.app import create_app
from leaderboard.server.render import replay_gif, replay_png
from leaderboard.server.settings import Settings
from leaderboard.server.web import images, replays
from leaderboard.server.web.pages import STYLE

ESCAPED_TEAM = "&lt;script&gt;alert(1)&lt;/script&gt;"


class Tags(HTMLParser):
    """Every start tag of a page, as (tag, attributes)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def attr(self, tag: str, name: str) -> list[str]:
        return [a[name] for t, a in self.tags if t == tag and a.get(name) is not None]


@pytest.fixture(scope="module")
def lb(tmp_path_factory: pytest.TempPathFactory) -> Board:
    return make_board(tmp_path_factory.mktemp("board"))


def _page(lb: Board, url: str, status: int = 200) -> str:
    answer = lb.client.get(url)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    page = answer.text
    tags = Tags(page)
    assert not [t for t, _ in tags.tags if t in ("script", "style")], "the CSP allows neither"
    assert not [a for _, a in tags.tags if "style" in a or any(k.startswith("on") for k in a)]
    assert tags.attr("link", "href") == ["/static/style.css"]
    return page


def _entry_order(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<a href="/entries/(\d+)">', page)]


def test_the_front_page_lists_tracks_grouped_by_suite_version(lb: Board) -> None:
    page = _page(lb, "/")
    sections = page.split('<section class="suite-version"')[1:]
    assert len(sections) == 2
    assert "version v1" in sections[0] and "version v0" in sections[1]
    assert re.findall(r'href="/tracks/([^"]+)"', sections[0]) == [FULL, PARTIAL]
    assert re.findall(r'href="/tracks/([^"]+)"', sections[1]) == [OLD_FULL]
    counts = re.findall(r'<td class="num">(\d+)</td>\s*</tr>', sections[0])
    assert counts == ["1", "3"], "entries per track"


def test_the_stylesheet_is_served(lb: Board) -> None:
    answer = lb.client.get("/static/style.css")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/css")
    assert "table" in answer.text


def test_column_headers_sort_the_table_on_the_server(lb: Board) -> None:
    page = _page(lb, f"/tracks/{PARTIAL}")
    links = dict(re.findall(r'<a href="\?sort=(\w+)&amp;order=(asc|desc)">', page))
    assert links["rank"] == "desc", "the sorted column's link flips its order"
    assert links["SR"] == "desc" and links["L"] == "asc" and links["team"] == "asc"
    assert {"TR", "C", "B", "speedup", "EI", "comm_tokens", "llm_tokens", "wall_time_s",
            "method", "attempts", "reproductions", "created"} <= set(links)  # fmt: skip
    heuristic, planner, random = (lb.entries[k] for k in ("heuristic", "llm_planner", "random"))
    by_speedup = _page(lb, f"/tracks/{PARTIAL}?sort=speedup&order=asc")
    assert _entry_order(by_speedup) == [heuristic, planner, random], "no speedup: last"
    assert 'aria-sort="ascending"' in by_speedup
    by_tokens = _page(lb, f"/tracks/{PARTIAL}?sort=llm_tokens&order=desc")
    assert _entry_order(by_tokens)[0] == planner
    by_time = _page(lb, f"/tracks/{PARTIAL}?sort=wall_time_s&order=asc")
    assert _entry_order(by_time) == [heuristic, random, planner]
    assert re.search(r'href="\?sort=wall_time_s&amp;order=desc">wall time\* ▲', by_time)


def _text(page: str) -> str:
    """The page's words, tags removed and spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


def test_the_track_table_shows_ranks_intervals_and_the_interval_methods(lb: Board) -> None:
    page = _page(lb, f"/tracks/{PARTIAL}")
    assert "SR: Clopper-Pearson 95%; every other metric: Student-t 95%" in _text(page)
    assert "Wilson" not in page
    assert re.findall(r'<td class="num rank">(\d+)</td>', page) == ["1", "1", "1"]
    assert '0.67 <span class="ci">[0.22, 0.96]</span>' in page, "SR 4/6, Clopper-Pearson"
    assert '0.00 <span class="ci">[0.00, 0.46]</span>' in page, "SR 0/6, Clopper-Pearson"


def test_a_track_too_small_to_separate_its_entries_says_so(lb: Board) -> None:
    text = _text(_page(lb, f"/tracks/{PARTIAL}"))
    assert "These 3 entries cannot be told apart on this track" in text
    assert "every entry's SR interval overlaps every other's, so all share rank 1" in text
    assert "Each entry's SR is over 6 run episodes," in text
    assert "even an SR of 0 has the 95% interval [0.00, 0.46]" in text
    alone = _page(lb, f"/tracks/{FULL}")
    assert 'id="not-separated"' not in alone, "one entry is not a tie"


def test_a_track_whose_ranks_separate_its_entries_has_no_such_note(tmp_path: Path) -> None:
    lb = empty_board(tmp_path)
    submit_verified(lb.sessions, lb.data_dir, "solvers", "oracle")  # 6 of 6: [0.54, 1]
    submit_verified(lb.sessions, lb.data_dir, "walkers", "random", track=FULL)  # 0 of 6
    page = _page(lb, f"/tracks/{FULL}")
    assert re.findall(r'<td class="num rank">(\d+)</td>', page) == ["1", "2"]
    assert 'id="not-separated"' not in page and "cannot be told apart" not in page


def test_the_track_and_entry_pages_say_what_attempts_count(lb: Board) -> None:
    for url in (f"/tracks/{PARTIAL}", f"/entries/{lb.entries['heuristic']}"):
        text = _text(_page(lb, url))
        assert (
            "attempts: every submission the team made to this track, verified, rejected or pending"
            in text
        ), url
    entry = _text(_page(lb, f"/entries/{lb.entries['heuristic']}"))
    assert "attempts 2 attempts by this team on this track" in entry


def test_a_hidden_seed_track_counts_every_challenge_drawn_as_an_attempt(tmp_path: Path) -> None:
    lb = empty_board(tmp_path)
    hidden = "test-v1.n2.comm-on.partial.skill"
    sid = submit_verified(lb.sessions, lb.data_dir, "drawers", "heuristic", track=hidden)
    text = _text(_page(lb, f"/tracks/{hidden}"))
    assert "hidden seeds (episodes come from challenges)" in text
    assert "attempts: every challenge the team drew for suite test v1, answered or not" in text
    with lb.sessions() as session:
        entry = crud.get_submission(session, sid).entry.id
    assert "every challenge the team drew" in _text(_page(lb, f"/entries/{entry}"))


def test_a_bad_sort_column_is_a_422_page(lb: Board) -> None:
    page = _page(lb, f"/tracks/{PARTIAL}?sort=%3Cb%3E", status=422)
    assert "&#39;&lt;b&gt;&#39; is not a column" in page


def test_a_script_team_name_is_escaped_on_every_page(lb: Board) -> None:
    pages = [
        _page(lb, f"/tracks/{PARTIAL}"),
        _page(lb, f"/entries/{lb.entries['llm_planner']}"),
        _page(lb, f"/submissions/{lb.submissions['llm_planner']}"),
    ]
    for page in pages:
        assert ESCAPED_TEAM in page
        assert SCRIPT_TEAM not in page and "<script" not in page.lower()


def test_only_http_urls_become_links_and_any_method_name_is_plotted(tmp_path: Path) -> None:
    lb = empty_board(tmp_path)
    sid = submit_verified(
        lb.sessions,
        lb.data_dir,
        "linkers",
        "heuristic",
        method="$\\frac{1}{$ links",  # malformed mathematics for matplotlib
        code_url="javascript:alert(1)",
        paper_url='https://example.org/paper?a=1&b="x"',
    )
    with lb.sessions() as session:
        entry = crud.get_submission(session, sid).entry
    page = _page(lb, f"/entries/{entry.id}")
    hrefs = Tags(page).attr("a", "href")
    assert 'https://example.org/paper?a=1&b="x"' in hrefs
    assert not [h for h in hrefs if "javascript" in h]
    assert "javascript:alert(1)" in page, "shown as text"
    plot = lb.client.get(f"/entries/{entry.id}/plot.png")
    assert plot.status_code == 200 and plot.content.startswith(b"\x89PNG"), "label drawn as typed"


def test_an_entry_page_has_its_tables_plot_replays_reproductions_and_download(lb: Board) -> None:
    oracle = lb.entries["oracle"]
    page = _page(lb, f"/entries/{oracle}")
    images = Tags(page).attr("img", "src")
    assert images == [f"/entries/{oracle}/plot.png", f"/entries/{oracle}/episodes/0.gif"]
    replays_ = re.findall(r'<a class="replay" href="([^"]+)">', page)
    assert replays_ == [f"/entries/{oracle}/episodes/{n}" for n in range(6)], "every episode"
    for family in ("all", "heavy-lift", "prepare", "rearrange", "search", "switch-off"):
        assert f"<td>{family}</td>" in page
    assert '1.00 <span class="ci">[0.54, 1.00]</span>' in page, "SR 6/6, Clopper-Pearson"
    assert "SR: Clopper-Pearson 95%; every other metric: Student-t 95%" in _text(page)
    assert "the only entry of its track" in page
    assert f'href="/api/entries/{oracle}/bundle"' in page
    assert '<td class="team">reproducers</td>' in page
    assert "No other team" not in page
    assert f'<a href="/submissions/{lb.submissions["oracle-again"]}">' in page
    assert "self-reported, not verified" in page
    assert '<a href="https://example.org/oracle"' in page


def test_the_plot_is_a_png_against_the_other_entries_of_the_track(lb: Board) -> None:
    page = _page(lb, f"/entries/{lb.entries['heuristic']}")
    assert "beside those of the 2 best-ranked other entries" in _text(page)
    answer = lb.client.get(f"/entries/{lb.entries['heuristic']}/plot.png")
    assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"
    assert answer.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert Image.open(io.BytesIO(answer.content)).size == (900, 360)
    assert 'width="900" height="360"' in page
    again = lb.client.get(f"/entries/{lb.entries['heuristic']}/plot.png").content
    assert again == answer.content


def test_a_one_episode_family_shows_n1_not_a_zero_width_interval(lb: Board) -> None:
    page = _page(lb, f"/entries/{lb.entries['oracle']}")
    prepare = re.search(r"<tr>\s*<td>prepare</td>(.*?)</tr>", page, re.S)
    assert prepare is not None
    cells = re.findall(r'<td class="num">(.*?)</td>', prepare.group(1), re.S)
    assert cells[0] == "1", "one episode"
    sr, L = cells[1], cells[5]
    assert sr == '1.00 <span class="ci">[0.03, 1.00]</span>', "SR's exact interval holds at n=1"
    assert re.fullmatch(r'\d+\.\d <span class="ci">n=1</span>', L), L
    assert not re.search(r"\[(-?[\d.]+), \1\]", prepare.group(1)), "no zero-width interval"


def test_the_replays_are_gifs_drawn_from_the_verified_traces(lb: Board) -> None:
    bundle, _, _ = verified("oracle")
    runs = [r for r in bundle.rows if not r["reference"]]
    for n in (0, 4):  # any episode, not only the first three
        answer = lb.client.get(f"/entries/{lb.entries['oracle']}/episodes/{n}.gif")
        assert answer.status_code == 200 and answer.headers["content-type"] == "image/gif"
        assert answer.content.startswith(b"GIF89a")
        gif = Image.open(io.BytesIO(answer.content))
        assert gif.n_frames == bundle.traces[runs[n]["key"]]["final"]["ticks"] + 1
        assert answer.content == replay_gif(bundle.traces[runs[n]["key"]])
    page = _page(lb, f"/entries/{lb.entries['oracle']}")
    assert f"{runs[0]['task']}, {runs[0]['scene']}, seed {runs[0]['seed']}" in page


def test_the_replay_page_of_any_episode_shows_its_tick_actions_messages_and_checklist(
    lb: Board,
) -> None:
    bundle, _, _ = verified("heuristic")
    runs = [r for r in bundle.rows if not r["reference"]]
    n = 4  # past the three the entry page used to show
    trace = bundle.traces[runs[n]["key"]]
    tick = trace["messages"][0]["tick"] + 1  # the messages sent before this tick ran
    entry = lb.entries["heuristic"]
    base = f"/entries/{entry}/episodes/{n}"
    page = _page(lb, f"{base}?tick={tick}")
    text = _text(page)
    assert f"Episode {n}: {runs[n]['task']}, {runs[n]['scene']}, seed {runs[n]['seed']}" in text
    assert f"tick {tick} / {trace['final']['ticks']}" in text
    assert Tags(page).attr("img", "src") == [f"{base}/ticks/{tick}.png", f"{base}.gif"]
    decided = next(d for d in trace["decisions"] if d["tick"] == tick - 1)["actions"]
    agents = page.split('<li class="agent">')[1:]
    for agent, action in decided.items():
        block = next(b for b in agents if f"<strong>{agent}</strong>" in b)
        assert f'decided: <code class="said">{escape(action)}</code>' in block, agent
    said = [m for m in trace["messages"] if m["tick"] == tick - 1]
    assert said and all(f"“{m['text']}”" in text for m in said)
    done = sum(checklist_states(trace)[tick])
    assert f"Checklist: {done} of {len(trace['checklist'])} satisfied" in text
    assert f'href="{base}?tick={tick + 1}"' in page and f'href="{base}?tick={tick - 1}"' in page
    assert f'href="/entries/{entry}/episodes/{n + 1}"' in page
    frame = lb.client.get(f"{base}/ticks/{tick}.png")
    assert frame.status_code == 200 and frame.headers["content-type"] == "image/png"
    assert frame.content == replay_png(trace, tick)


def test_the_checklist_fills_up_over_the_ticks_of_a_replay(lb: Board) -> None:
    bundle, _, _ = verified("oracle")
    trace = bundle.traces[next(r for r in bundle.rows if not r["reference"])["key"]]
    base = f"/entries/{lb.entries['oracle']}/episodes/0"
    first = _text(_page(lb, f"{base}?tick=0"))
    assert "Checklist: 0 of 4 satisfied" in first and "The start" in first
    change = trace["atoms"][0]
    page = _page(lb, f"{base}?tick={change['tick'] + 1}")
    assert f"satisfied in this tick by {change['agent']}" in _text(page)
    last = _text(_page(lb, f"{base}?tick={trace['final']['ticks']}"))
    assert "Checklist: 4 of 4 satisfied" in last and "solved after" in last


def test_the_episode_list_links_every_episode(lb: Board) -> None:
    entry = lb.entries["random"]
    page = _page(lb, f"/entries/{entry}/episodes")
    links = re.findall(r'<a class="replay" href="([^"]+)">', page)
    assert links == [f"/entries/{entry}/episodes/{n}" for n in range(6)]
    assert "page 1 of 1" in _text(page)


def test_pages_of_episodes_and_tick_links_cover_everything() -> None:
    assert replays.paginate(0, 1) == replays.Pages(1, 1, 0, 0, 0)
    assert replays.paginate(60, 3, per_page=25) == replays.Pages(3, 3, 60, 50, 60)
    with pytest.raises(ValueError, match=r"page 4 is not in \[1, 3\]"):
        replays.paginate(60, 4, per_page=25)
    links = replays.tick_links(101, 207)
    assert links[0] == 0 and links[-1] == 207 and {100, 101, 102} <= set(links)
    assert len(links) <= replays.TICK_LINKS + 3
    assert replays.tick_links(0, 3) == [0, 1, 2, 3]


def test_the_picture_cache_is_bounded_in_items_and_bytes() -> None:
    cache = images.LRU(size=3, max_bytes=100)
    for k in range(4):
        cache.put(k, b"x" * 10)
    assert cache.get(0) is None and cache.get(3) == b"x" * 10, "the oldest item went first"
    cache.put("big", b"y" * 90)
    assert cache.get("big") is not None and cache.get(1) is None, "bytes evict the oldest"
    cache.put("huge", b"z" * 101)
    assert cache.get("huge") is None, "an item over the budget is not kept"
    cache.put("trace", {"decisions": []}, weight=95)
    assert cache.get("trace") is not None and cache.get("big") is None


def test_a_drawn_replay_is_served_from_the_cache_afterwards(lb: Board) -> None:
    entry = lb.entries["oracle"]
    first = lb.client.get(f"/entries/{entry}/episodes/5/ticks/2.png").content
    with lb.sessions() as session:
        sha256 = crud.get_submission(session, lb.submissions["oracle"]).bundle_sha256
    assert images.CACHE.get(("frame", sha256, 5, 2)) == first
    assert lb.client.get(f"/entries/{entry}/episodes/5/ticks/2.png").content == first


def test_the_pages_agent_colours_are_the_maps(lb: Board) -> None:
    css = STYLE.read_text()
    for k, (r, g, b) in enumerate(AGENT_COLOURS):
        assert f".agent-{k} {{ background: rgb({r}, {g}, {b}); }}" in css


@pytest.mark.parametrize(
    "url",
    [
        "/entries/999",
        "/entries/999/plot.png",
        "/entries/1/episodes/6.gif",
        "/entries/1/episodes/x.gif",
        "/entries/999/episodes/0.gif",
        "/entries/1/episodes/6",
        "/entries/999/episodes/0",
        "/entries/1/episodes/0?tick=99999",
        "/entries/1/episodes/0/ticks/99999.png",
        "/entries/1/episodes/6/ticks/0.png",
        "/entries/999/episodes",
        "/entries/1/episodes?page=2",
        "/submissions/999",
        f"/submissions/{2**40}",
        "/tracks/smoke-v9.n2.comm-on.full.skill",
    ],
)
def test_unknown_pages_and_pictures_are_404(lb: Board, url: str) -> None:
    answer = lb.client.get(url)
    assert answer.status_code == 404
    assert "There is no" in answer.text


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("/entries/1/episodes/abc", "episode: 'abc' is not a whole number"),
        ("/entries/1/episodes/-1", "episode: '-1' is not a whole number"),
        ("/entries/1/episodes/0?tick=-3", "tick: '-3' is not a whole number"),
        ("/entries/1/episodes/0?tick=1e3", "tick: '1e3' is not a whole number"),
        ("/entries/1/episodes/0?tick=" + "9" * 40, "is not a whole number"),
        ("/entries/1/episodes?page=x", "page: 'x' is not a whole number"),
    ],
)
def test_a_malformed_episode_tick_or_page_is_a_422_page(lb: Board, url: str, says: str) -> None:
    page = _page(lb, url, status=422)
    assert says in page.replace("&#39;", "'")


def test_reproductions_show_what_each_other_team_adds(tmp_path: Path) -> None:
    lb = make_board(tmp_path)
    later = T0 + timedelta(days=2)
    submit_verified(lb.sessions, lb.data_dir, "reference", "oracle", now=later)  # its own
    third = submit_verified(
        lb.sessions,
        lb.data_dir,
        "replicators",
        "oracle",
        now=later + timedelta(hours=1),
        method="oracle, reimplemented",
        description="An independent reimplementation <b>from the paper</b>.",
        code_url="https://example.org/replica",
        paper_url="https://example.org/replica.pdf",
    )
    page = _page(lb, f"/entries/{lb.entries['oracle']}")
    section = page.split('<table class="reproductions">')[1].split("</table>")[0]
    teams = re.findall(r'<td class="team">([^<]+)</td>', section)
    assert teams == ["reproducers", "replicators"], "other teams only, one row each"
    assert "An independent reimplementation &lt;b&gt;from the paper&lt;/b&gt;." in section
    assert '<a href="https://example.org/replica" rel="nofollow noopener">' in section
    assert '<a href="https://example.org/replica.pdf" rel="nofollow noopener">' in section
    assert f'<a href="/submissions/{third}">' in section
    assert "reproductions 2 other teams" in _text(page)
    table = _page(lb, f"/tracks/{FULL}")
    assert re.findall(r'<td class="num reproductions">(\d+)</td>', table) == ["2"]


def test_a_reproduction_page_links_the_entry_it_reproduces(lb: Board) -> None:
    page = _page(lb, f"/submissions/{lb.submissions['oracle-again']}")
    assert "verified" in page
    assert f'<a href="/entries/{lb.entries["oracle"]}">entry {lb.entries["oracle"]}</a>' in page
    assert "recorded as a reproduction" in page
    assert 'http-equiv="refresh"' not in page


def test_a_rejected_submission_shows_its_reason_and_episode_reasons(tmp_path: Path) -> None:
    lb = empty_board(tmp_path)
    bundle, verdict, _ = verified("oracle")
    with lb.sessions() as session:
        team = crud.create_team(session, "forgers", T0)
        upload = crud.Upload(
            track=FULL,
            suite="smoke",
            suite_version="v1",
            bundle_path=f"bundles/{bundle.sha256}.tar.gz",
            bundle_sha256=bundle.sha256,
            fields={"method": "<i>forged</i>"},
        )
        queued = crud.store_submission(session, team.id, upload, daily_limit=3, now=T0).id
        other = replace(upload, bundle_sha256="0" * 64)  # another bundle of the team's
        pending = crud.store_submission(session, team.id, other, daily_limit=3, now=T0).id
        crud.claim_next(session, T0)
        bad = verdict.episodes[0]
        crud.record_verdict(
            session,
            queued,
            ok=False,
            reason="1 episode failed verification",
            episodes=[
                type(bad)(bad.key, False, ("SR: 1.0 != 0.0 <b>",), {}, bad.trace_hash),
                *verdict.episodes[1:],
            ],
        )
    page = _page(lb, f"/submissions/{queued}")
    assert "rejected" in page and "1 episode failed verification" in page
    assert "SR: 1.0 != 0.0 &lt;b&gt;" in page
    assert bad.key in page
    assert "&lt;i&gt;forged&lt;/i&gt;" in page and "<i>" not in page
    waiting = _page(lb, f"/submissions/{pending}")
    assert "queued" in waiting and 'http-equiv="refresh"' in waiting


def test_no_replay_is_drawn_from_a_stored_file_that_is_not_the_verified_bundle(
    tmp_path: Path,
) -> None:
    lb = empty_board(tmp_path)
    sid = submit_verified(lb.sessions, lb.data_dir, "team", "oracle")
    with lb.sessions() as session:
        submission = crud.get_submission(session, sid)
        entry, stored = submission.entry.id, lb.data_dir / submission.bundle_path
    stored.write_bytes((SEED / "random-smoke-v1.tar.gz").read_bytes())
    images.CACHE.clear()  # pictures of the same bundle drawn by other tests of this process
    assert lb.client.get(f"/entries/{entry}/episodes/0.gif").status_code == 404
    page = _page(lb, f"/entries/{entry}")
    assert "no replay can be drawn" in page and ".gif" not in page
    stored.write_bytes(b"not a bundle")
    assert lb.client.get(f"/entries/{entry}/episodes/1.gif").status_code == 404


def test_the_app_serves_every_page_with_its_content_security_policy(tmp_path: Path) -> None:
    lb = make_board(tmp_path)
    app = create_app(Settings(data_dir=lb.data_dir, secret=b"s" * 32), workers=False)
    oracle = lb.entries["oracle"]
    urls = [
        "/",
        f"/tracks/{FULL}?sort=SR",
        f"/entries/{oracle}",
        f"/entries/{oracle}/plot.png",
        f"/entries/{oracle}/episodes/0.gif",
        f"/entries/{oracle}/episodes",
        f"/entries/{oracle}/episodes/5?tick=3",
        f"/entries/{oracle}/episodes/5/ticks/3.png",
        f"/submissions/{lb.submissions['oracle-again']}",
        "/static/style.css",
        "/entries/999",
    ]
    with TestClient(app) as client:
        for url in urls:
            answer = client.get(url)
            assert answer.status_code == (404 if url == "/entries/999" else 200), url
            policy = answer.headers["content-security-policy"]
            assert "default-src 'none'" in policy and "img-src 'self'" in policy, url
            assert "style-src 'self'" in policy and "script-src" not in policy, url
            assert answer.headers["x-content-type-options"] == "nosniff", url
        page = client.get(f"/tracks/{PARTIAL}").text
        assert ESCAPED_TEAM in page and "<script" not in page
        refused = client.get(f"/api/tracks/{PARTIAL}", params={"sort": "bogus"})
        assert refused.status_code == 422 and refused.json()["field"] == "query.sort"
        spec = client.get("/api/openapi.json").json()
        assert "/api/tracks/{key}" in spec["paths"] and "/tracks/{key}" not in spec["paths"]
