"""The one markdown-table shape of the written reports (benchmark/results/markdown.py)."""

import pytest

from benchmark.results.markdown import markdown_table


def test_a_table_has_its_header_separator_and_rows():
    lines = markdown_table(("a", "b"), [["1", "2"], ["x", ""]])
    assert lines == ["| a | b |", "|---|---|", "| 1 | 2 |", "| x |  |"]


def test_a_row_of_the_wrong_width_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"a row of 3 cells under 2 columns: \['1', '2', '3'\]"):
        markdown_table(("a", "b"), [["1", "2", "3"]])
