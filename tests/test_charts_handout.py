"""The Take it home page's table of contents: one row per stage, every text escaped."""

from __future__ import annotations

from charts.handout import contents_table
from lifecycle.features.handout import HandoutSection
from tests.html_cells import read_table


def test_a_row_per_stage_with_its_key_numbers_and_chart_count():
    sections = [HandoutSection("Tokenization", "", [("tokens", "12"), ("bytes", "40")], ["{}", "{}"]),
                HandoutSection("Next token", "", [("#1 ' Paris'", "71.3%")])]
    assert read_table(contents_table(sections)).rows == [["stage", "key numbers", "charts"],
                                                         ["Tokenization", "tokens: 12; bytes: 40", "2"],
                                                         ["Next token", "#1 ' Paris': 71.3%", "0"]]


def test_text_from_the_run_is_shown_as_text_never_as_markup():
    hostile = '<img src=x onerror="alert(1)"> & <script>alert(2)</script>'
    table = read_table(contents_table([HandoutSection(hostile, "", [("top token", hostile)])]))
    assert table.rows[1] == [hostile, f"top token: {hostile}", "0"]
    assert not {"img", "script"} & set(table.tags)
