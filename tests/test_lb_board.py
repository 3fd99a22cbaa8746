"""The board's read side through its JSON API, on a board of real verified entries: tracks
grouped by suite version, ranked tables with tied ranks (and the flag that says a table cannot
separate its entries), sorting by any column with missing values last, entries with each
metric's declared interval, attempts and reproductions by other teams (with what each adds),
the bundle download, 404s, and an OpenAPI spec that says exactly what each answer holds."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest
from helpers.lb_board import (
    FORMULA_METHOD,
    FULL,
    OLD_FULL,
    PARTIAL,
    SCRIPT_TEAM,
    SEED,
    T0,
    Board,
    make_board,
    submit_verified,
)

from benchmark.metrics.stats import clopper_pearson
from leaderboard.core.bundle import read_bundle, stored_form
from leaderboard.core.ranking import INTERVALS
from leaderboard.server import board


@pytest.fixture(scope="module")
def lb(tmp_path_factory: pytest.TempPathFactory) -> Board:
    return make_board(tmp_path_factory.mktemp("board"))


def _table(lb: Board, key: str = PARTIAL, **params: str) -> dict:
    answer = lb.client.get(f"/api/tracks/{key}", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_tracks_of_two_suite_versions_are_listed_apart(lb: Board) -> None:
    groups = lb.client.get("/api/tracks").json()["suite_versions"]
    assert [(g["suite"], g["suite_version"]) for g in groups] == [("smoke", "v1"), ("smoke", "v0")]
    keys = [[t["key"] for t in g["tracks"]] for g in groups]
    assert keys == [[FULL, PARTIAL], [OLD_FULL]]
    for group in groups:
        assert {t["suite_version"] for t in group["tracks"]} == {group["suite_version"]}
    counts = {t["key"]: t["entries"] for g in groups for t in g["tracks"]}
    assert counts == {FULL: 1, PARTIAL: 3, OLD_FULL: 1}, "a reproduction is not an entry"


def test_overlapping_intervals_share_a_rank_whatever_the_means(lb: Board) -> None:
    table = _table(lb)
    rows = table["rows"]
    assert [r["rank"] for r in rows] == [1, 1, 1] and table["all_tied"] is True
    assert _table(lb, FULL)["all_tied"] is False, "one entry is not a tie"
    assert [r["SR"]["mean"] for r in rows] == [pytest.approx(4 / 6), 0.0, 0.0]
    # The ranks are tied because every interval overlaps every other, not because means agree.
    assert all(a["SR"]["lo"] <= b["SR"]["hi"] for a in rows for b in rows)
    heuristic = rows[0]
    assert heuristic["method"] == "heuristic"
    assert (heuristic["SR"]["lo"], heuristic["SR"]["hi"]) == pytest.approx(clopper_pearson(4, 6))
    assert table["intervals"] == INTERVALS and table["intervals"]["SR"] == "Clopper-Pearson 95%"
    assert heuristic["SR"]["successes"] == 4 and heuristic["SR"]["n"] == 6


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_rows_without_a_value_come_last_in_either_order(lb: Board, order: str) -> None:
    rows = _table(lb, sort="speedup", order=order)["rows"]
    assert rows[0]["method"] == "heuristic"
    assert rows[0]["speedup"]["mean"] > 0
    assert [r["speedup"]["mean"] for r in rows[1:]] == [None, None]


def test_sorting_by_a_column_orders_the_rows(lb: Board) -> None:
    by_time = _table(lb, sort="wall_time_s", order="asc")["rows"]
    times = [r["wall_time_s"] for r in by_time]
    assert times == sorted(times) and len(set(times)) == 3
    assert [r["wall_time_s"] for r in _table(lb, sort="wall_time_s", order="desc")["rows"]] == (
        times[::-1]
    )
    by_method = [r["method"] for r in _table(lb, sort="method", order="asc")["rows"]]
    assert by_method == [FORMULA_METHOD, "heuristic", "llm_planner"]
    by_team = [r["team"] for r in _table(lb, sort="team", order="desc")["rows"]]
    assert by_team == ["reference", "reference", SCRIPT_TEAM]
    by_tokens = [r["llm_tokens"] for r in _table(lb, sort="llm_tokens", order="desc")["rows"]]
    assert by_tokens[0] == 22981


def test_a_column_is_first_sorted_best_first(lb: Board) -> None:
    table = _table(lb, sort="SR")
    assert (table["sort"], table["order"]) == ("SR", "desc")
    assert table["rows"][0]["method"] == "heuristic"
    assert _table(lb, sort="L")["order"] == "asc"
    assert (_table(lb)["sort"], _table(lb)["order"]) == ("rank", "asc")


@pytest.mark.parametrize(
    ("params", "field"), [({"sort": "bogus"}, "sort"), ({"sort": "SR", "order": "up"}, "order")]
)
def test_a_bad_sort_column_or_order_is_refused(lb: Board, params: dict, field: str) -> None:
    answer = lb.client.get(f"/api/tracks/{PARTIAL}", params=params)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["query", field]
    with pytest.raises(board.SortError, match=field):
        board.check_sort(params["sort"], params.get("order"))


@pytest.mark.parametrize(
    ("url", "status"),
    [
        ("/api/tracks/smoke-v9.n2.comm-on.full.skill", 404),
        ("/api/tracks/not-a-track", 404),
        ("/api/entries/999", 404),
        ("/api/entries/999/bundle", 404),
        ("/api/entries/0", 422),
        (f"/api/entries/{2**40}", 422),
    ],
)
def test_unknown_tracks_and_entries_are_refused(lb: Board, url: str, status: int) -> None:
    assert lb.client.get(url).status_code == status


def test_an_entry_has_its_families_with_intervals(lb: Board) -> None:
    entry = lb.client.get(f"/api/entries/{lb.entries['oracle']}").json()
    assert entry["track"]["key"] == FULL and entry["rank"] == 1
    assert entry["intervals"] == INTERVALS
    families = entry["families"]
    assert set(families) == {"all", "heavy-lift", "prepare", "rearrange", "search",
                             "switch-off", "transport"}  # fmt: skip
    assert families["all"]["episodes"] == entry["episodes"] == 6
    assert sum(f["episodes"] for name, f in families.items() if name != "all") == 6
    sr = families["all"]["metrics"]["SR"]
    assert (sr["mean"], sr["successes"]) == (1.0, 6)
    assert (sr["lo"], sr["hi"]) == pytest.approx(clopper_pearson(6, 6))
    for name in ("TR", "C", "B", "L", "speedup", "EI", "message_tokens"):
        cell = families["all"]["metrics"][name]
        assert cell["lo"] <= cell["mean"] <= cell["hi"], name
    one = families["prepare"]  # one episode: its Student-t cells have no bounds, only n
    assert one["episodes"] == 1
    assert one["metrics"]["L"]["n"] == 1 and one["metrics"]["L"]["lo"] is None
    assert one["metrics"]["SR"]["lo"] == pytest.approx(0.025), "SR's exact interval holds at n=1"
    assert "specialisation" in families["all"]["run_metrics"]
    assert entry["code_url"] == "https://example.org/oracle"
    assert entry["bundle"] == f"/api/entries/{entry['id']}/bundle"


def test_an_entry_lists_attempts_reproductions_and_self_reported_numbers(lb: Board) -> None:
    oracle = lb.client.get(f"/api/entries/{lb.entries['oracle']}").json()
    assert [(r["team"], r["submission"]) for r in oracle["reproductions"]] == [
        ("reproducers", lb.submissions["oracle-again"])
    ]
    assert oracle["reproductions"][0]["method"] == "oracle"
    assert oracle["reproductions"][0]["self_reported"] == {"llm_tokens": 0, "wall_time_s": 1.587}
    assert oracle["self_reported"] == {"llm_tokens": 0, "wall_time_s": 1.587}
    assert oracle["attempts"] == 1
    heuristic = lb.client.get(f"/api/entries/{lb.entries['heuristic']}").json()
    assert heuristic["attempts"] == 2, "the reference team submitted twice on the track"
    rows = {r["entry"]: r for r in _table(lb, FULL)["rows"]}
    assert rows[lb.entries["oracle"]]["reproductions"] == 1
    assert rows[lb.entries["oracle"]]["attempts"] == 1


def test_the_bundle_download_is_the_stored_verified_file(lb: Board) -> None:
    answer = lb.client.get(f"/api/entries/{lb.entries['heuristic']}/bundle")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/gzip"
    assert answer.headers["content-disposition"].startswith("attachment;")
    with (SEED / "heuristic-smoke-v1.tar.gz").open("rb") as stream:
        uploaded = read_bundle(stream)
    assert answer.content == stored_form(uploaded)
    served = read_bundle(io.BytesIO(answer.content))
    assert "code_version" not in served.manifest and "config_hash" not in served.manifest
    assert served.traces == uploaded.traces


def test_a_missing_bundle_file_is_a_404_naming_the_entry(tmp_path: Path) -> None:
    lb = make_board(tmp_path)
    for path in (lb.data_dir / "bundles").iterdir():
        path.unlink()
    answer = lb.client.get(f"/api/entries/{lb.entries['oracle']}/bundle")
    assert answer.status_code == 404
    assert f"entry {lb.entries['oracle']}" in answer.json()["detail"]


def test_the_openapi_spec_describes_every_board_answer(lb: Board) -> None:
    spec = lb.client.get("/openapi.json").json()
    paths = spec["paths"]
    assert set(paths) == {
        "/api/tracks",
        "/api/tracks/{key}",
        "/api/entries/{entry_id}",
        "/api/entries/{entry_id}/bundle",
        "/api/export",
    }, "the pages stay out of the API's spec"
    track = paths["/api/tracks/{key}"]["get"]
    sort = next(p for p in track["parameters"] if p["name"] == "sort")
    assert sort["schema"]["enum"] == list(board.SORT_COLUMNS)
    ok = track["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/TrackTableOut"}
    assert "404" in track["responses"]
    row = spec["components"]["schemas"]["RowOut"]
    assert {"rank", "SR", "speedup", "EI", "comm_tokens", "llm_tokens"} <= set(row["required"])
    assert (
        "application/gzip"
        in paths["/api/entries/{entry_id}/bundle"]["get"]["responses"]["200"]["content"]
    )
    assert "application/zip" in paths["/api/export"]["get"]["responses"]["200"]["content"]


def test_reproductions_count_distinct_other_teams_never_the_entrys_own(tmp_path: Path) -> None:
    lb = make_board(tmp_path)
    oracle = lb.entries["oracle"]
    later = [T0 + timedelta(days=d) for d in (2, 3, 4)]
    own = submit_verified(lb.sessions, lb.data_dir, "reference", "oracle", now=later[0])
    again = submit_verified(lb.sessions, lb.data_dir, "reproducers", "oracle", now=later[1])
    third = submit_verified(
        lb.sessions,
        lb.data_dir,
        "replicators",
        "oracle",
        now=later[2],
        method="oracle, reimplemented",
        description="An independent reimplementation.",
        code_url="https://example.org/replica",
        paper_url="https://example.org/replica.pdf",
    )
    entry = lb.client.get(f"/api/entries/{oracle}").json()
    reproductions = [(r["team"], r["submission"]) for r in entry["reproductions"]]
    assert reproductions == [
        ("reproducers", lb.submissions["oracle-again"]),
        ("replicators", third),
    ], "one per other team, its earliest; the entry's own team is not a reproduction"
    assert own not in [s for _, s in reproductions] and again not in [s for _, s in reproductions]
    replica = entry["reproductions"][1]
    assert replica["description"] == "An independent reimplementation."
    assert replica["code_url"] == "https://example.org/replica"
    assert replica["paper_url"] == "https://example.org/replica.pdf"
    assert replica["method"] == "oracle, reimplemented"
    row = next(r for r in _table(lb, FULL)["rows"] if r["entry"] == oracle)
    assert row["reproductions"] == 2
    assert row["attempts"] == 2, "the reference team's own resubmission is an attempt"


def test_a_track_says_whether_its_seeds_are_hidden(lb: Board) -> None:
    assert _table(lb)["track"]["hidden_seeds"] is False
    with lb.sessions() as session:
        assert board.TrackInfo.of("test-v1.n2.comm-on.partial.skill", 1).hidden_seeds is True
        assert board.track_info(session, PARTIAL).hidden_seeds is False
