"""The board's pages on a board of real verified entries: tracks grouped by suite version, a
table sorted server-side through its header links, entry pages with the server's own plot and
replay GIFs (drawn from the verified traces), submission pages with their reasons, and every
user-supplied string escaped; no page holds a script or an inline style."""

from __future__ import annotations

import io
import re
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
from PIL import Image

from leaderboard import crud
from leaderboard.app import create_app
from leaderboard.render import replay_gif
from leaderboard.settings import Settings
from leaderboard.web import images

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


def test_the_track_table_shows_ranks_intervals_and_the_interval_methods(lb: Board) -> None:
    page = _page(lb, f"/tracks/{PARTIAL}")
    assert "Wilson score 95%" in page and "Student-t 95%" in page
    assert re.findall(r'<td class="num rank">(\d+)</td>', page) == ["1", "1", "1"]
    assert '0.67 <span class="ci">[0.30, 0.90]</span>' in page, "SR 4/6 with its interval"


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
    assert images == [
        f"/entries/{oracle}/plot.png",
        *(f"/entries/{oracle}/episodes/{n}.gif" for n in range(3)),
    ]
    for family in ("all", "heavy-lift", "prepare", "rearrange", "search", "switch-off"):
        assert f"<td>{family}</td>" in page
    assert '1.00 <span class="ci">[0.61, 1.00]</span>' in page, "SR 6/6, Wilson interval"
    assert "Wilson score 95%" in page and "Student-t 95%" in page
    assert "the only entry of its track" in page
    assert f'href="/api/entries/{oracle}/bundle"' in page
    assert '<td class="team">reproducers</td>' in page
    assert f'<a href="/submissions/{lb.submissions["oracle-again"]}">' in page
    assert "self-reported, not verified" in page
    assert '<a href="https://example.org/oracle"' in page


def test_the_plot_is_a_png_against_the_other_entries_of_the_track(lb: Board) -> None:
    page = _page(lb, f"/entries/{lb.entries['heuristic']}")
    assert "beside those of the 2 best-ranked other entries" in page
    answer = lb.client.get(f"/entries/{lb.entries['heuristic']}/plot.png")
    assert answer.status_code == 200 and answer.headers["content-type"] == "image/png"
    assert answer.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert Image.open(io.BytesIO(answer.content)).size == (700, 320)
    again = lb.client.get(f"/entries/{lb.entries['heuristic']}/plot.png").content
    assert again == answer.content


def test_the_replays_are_gifs_drawn_from_the_verified_traces(lb: Board) -> None:
    bundle, _, _ = verified("random")
    runs = [r for r in bundle.rows if not r["reference"]]
    for n in range(3):
        answer = lb.client.get(f"/entries/{lb.entries['random']}/episodes/{n}.gif")
        assert answer.status_code == 200 and answer.headers["content-type"] == "image/gif"
        assert answer.content.startswith(b"GIF89a")
        gif = Image.open(io.BytesIO(answer.content))
        assert gif.n_frames > 1
        assert answer.content == replay_gif(bundle.traces[runs[n]["key"]])
    page = _page(lb, f"/entries/{lb.entries['random']}")
    assert f"{runs[0]['task']}, {runs[0]['scene']}, seed {runs[0]['seed']}" in page


@pytest.mark.parametrize(
    "url",
    [
        "/entries/999",
        "/entries/999/plot.png",
        "/entries/1/episodes/3.gif",
        "/entries/999/episodes/0.gif",
        "/submissions/999",
        f"/submissions/{2**40}",
        "/tracks/smoke-v9.n2.comm-on.full.skill",
    ],
)
def test_unknown_pages_and_pictures_are_404(lb: Board, url: str) -> None:
    answer = lb.client.get(url)
    assert answer.status_code == 404
    assert "There is no" in answer.text


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
        pending = crud.store_submission(session, team.id, upload, daily_limit=3, now=T0).id
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
