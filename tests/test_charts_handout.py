"""The Take it home page's table of contents: one row per stage, every text escaped."""

from __future__ import annotations

from html.parser import HTMLParser

from charts.handout import contents_table
from lifecycle.features.handout import HandoutSection


class Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("th", "td"):
            self.rows[-1].append("")

    def handle_data(self, data: str) -> None:
        if self.rows and self.rows[-1]:
            self.rows[-1][-1] += data


def test_a_row_per_stage_with_its_key_numbers_and_chart_count():
    sections = [HandoutSection("Tokenization", "", [("tokens", "12"), ("bytes", "40")], ["{}", "{}"]),
                HandoutSection("Next token", "", [("#1 ' Paris'", "71.3%")])]
    parser = Cells()
    parser.feed(contents_table(sections))
    assert parser.rows == [["stage", "key numbers", "charts"],
                           ["Tokenization", "tokens: 12; bytes: 40", "2"],
                           ["Next token", "#1 ' Paris': 71.3%", "0"]]


def test_text_from_the_run_is_shown_as_text_never_as_markup():
    hostile = '<img src=x onerror="alert(1)"> & <script>alert(2)</script>'
    parser = Cells()
    parser.feed(contents_table([HandoutSection(hostile, "", [("top token", hostile)])]))
    assert parser.rows[1] == [hostile, f"top token: {hostile}", "0"]
    assert not {"img", "script"} & set(parser.tags)
