"""``GET /api/export`` on a board of real verified entries: one zip whose SHA256SUMS matches
its members and whose header gives its own sha256, the same bytes for the same data, the
server's recomputed numbers, and CSV cells defused against formula injection (text only:
numbers, negative ones included, stay numbers)."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from helpers.lb_board import FORMULA_METHOD, SCRIPT_TEAM, T0, Board, make_board, submit_verified

from benchmark.metrics.stats import clopper_pearson
from leaderboard.server import crud
from leaderboard.server.export import defuse

MEMBERS = ["README.txt", "entries.csv", "episodes.csv", "SHA256SUMS"]


@pytest.fixture(scope="module")
def lb(tmp_path_factory: pytest.TempPathFactory) -> Board:
    return make_board(tmp_path_factory.mktemp("board"))


def _export(lb: Board) -> tuple[bytes, dict[str, bytes], dict[str, str]]:
    answer = lb.client.get("/api/export")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/zip"
    assert answer.headers["content-disposition"].startswith("attachment;")
    with zipfile.ZipFile(io.BytesIO(answer.content)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    return answer.content, members, dict(answer.headers)


def _rows(blob: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(blob.decode("utf-8"))))


def test_the_archive_is_checksummed_member_by_member_and_whole(lb: Board) -> None:
    data, members, headers = _export(lb)
    assert list(members) == MEMBERS
    sums = {}
    for line in members["SHA256SUMS"].decode().splitlines():
        digest, name = line.split("  ")
        sums[name] = digest
    assert sums == {n: hashlib.sha256(members[n]).hexdigest() for n in MEMBERS[:-1]}
    whole = hashlib.sha256(data)
    assert headers["x-archive-sha256"] == whole.hexdigest()
    assert headers["repr-digest"] == f"sha-256=:{base64.b64encode(whole.digest()).decode()}:"


def test_the_same_data_gives_the_same_archive_and_new_data_another(tmp_path: Path) -> None:
    lb = make_board(tmp_path)
    first, _, headers = _export(lb)
    assert _export(lb)[0] == first
    later_version = "smoke-v2.n2.comm-on.partial.skill"
    submit_verified(
        lb.sessions, lb.data_dir, "late", "heuristic", track=later_version, now=T0 + timedelta(3)
    )
    changed, members, later = _export(lb)
    assert changed != first and later["x-archive-sha256"] != headers["x-archive-sha256"]
    assert len(_rows(members["entries.csv"])) == 6


def test_entries_csv_has_one_ranked_row_per_entry_with_intervals(lb: Board) -> None:
    rows = _rows(_export(lb)[1]["entries.csv"])
    assert sorted(int(r["entry_id"]) for r in rows) == sorted(lb.entries.values())
    heuristic = next(r for r in rows if r["method"] == "heuristic")
    assert heuristic["track"] == "smoke-v1.n2.comm-on.partial.skill"
    assert heuristic["suite_version"] == "v1" and heuristic["rank"] == "1"
    assert float(heuristic["SR_mean"]) == pytest.approx(4 / 6)
    assert (float(heuristic["SR_lo"]), float(heuristic["SR_hi"])) == pytest.approx(
        clopper_pearson(4, 6)
    )
    assert heuristic["SR_successes"] == "4" and heuristic["episodes"] == "6"
    assert heuristic["attempts"] == "2"
    oracle = next(r for r in rows if int(r["entry_id"]) == lb.entries["oracle"])
    assert oracle["reproductions"] == "1" and oracle["code_url"] == "https://example.org/oracle"
    planner = next(r for r in rows if r["team"] == SCRIPT_TEAM)
    assert planner["llm_tokens_self_reported"] == "22981" and planner["speedup_mean"] == ""


def test_the_readme_names_each_metrics_declared_interval_and_what_the_counts_mean(
    lb: Board,
) -> None:
    readme = " ".join(_export(lb)[1]["README.txt"].decode().split())
    assert "SR: Clopper-Pearson 95%; every other metric: Student-t 95%" in readme
    assert "Wilson" not in readme
    assert "every challenge the team drew" in readme, "what attempts count"
    assert "a team's own resubmissions do not count" in readme
    rows = _rows(_export(lb)[1]["entries.csv"])
    random = next(r for r in rows if int(r["entry_id"]) == lb.entries["random"])
    assert random["workload_entropy_n"] == "1" and random["workload_entropy_mean"] != ""
    assert random["workload_entropy_lo"] == random["workload_entropy_hi"] == "", "one value"


def test_formula_text_is_defused_and_numbers_stay_numbers(lb: Board) -> None:
    members = _export(lb)[1]
    entries = _rows(members["entries.csv"])
    assert "'" + FORMULA_METHOD in [r["method"] for r in entries]
    assert FORMULA_METHOD not in [r["method"] for r in entries]
    episodes = _rows(members["episodes.csv"])
    assert {r["method"] for r in episodes if r["entry_id"] == str(lb.entries["random"])} == {
        "'" + FORMULA_METHOD
    }
    negative = [r["EI_lo"] for r in entries if r["EI_lo"].startswith("-")]
    assert negative, "the board has negative interval bounds"
    for cell in negative:
        assert float(cell) < 0, "a negative number is written as a number, not defused"
    assert not [c for r in entries for c in r.values() if c.startswith("'") and c[1:2] == "-"]


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+2", "'=1+2"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("a=b", "a=b"),
        ("", ""),
        (-1.5, -1.5),
        (-3, -3),
        (0, 0),
        (None, ""),
        (True, "true"),
    ],
)
def test_defuse_prefixes_only_text_a_spreadsheet_would_run(value: object, cell: object) -> None:
    assert defuse(value) == cell


def test_episodes_csv_holds_the_recomputed_metrics_of_every_episode(lb: Board) -> None:
    rows = _rows(_export(lb)[1]["episodes.csv"])
    assert len(rows) == 12 * len(lb.entries), "6 episodes and their references per entry"
    with lb.sessions() as session:
        results = crud.get_submission(session, lb.submissions["heuristic"]).episodes
        by_key = {e.key: e.metrics for e in results}
    mine = [r for r in rows if r["entry_id"] == str(lb.entries["heuristic"])]
    assert {r["key"] for r in mine} == set(by_key)
    for row in mine:
        metrics = by_key[row["key"]]
        assert float(row["SR"]) == metrics["SR"] and int(row["L"]) == metrics["L"]
        influence = metrics["influence_rate"]
        assert row["influence_rate"] == ("" if influence is None else str(influence))
