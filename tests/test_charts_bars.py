"""The browser-drawn bars' data (charts.bars): what ui/live_bars.js reads, and what it refuses to draw."""

import math

import pytest

from charts.bars import BarChart, BarRow, BarView, Segment, Series, bars_data

SERIES = [Series("in the token", "#0072B2"), Series("held back", "#E69F00")]


def _chart(**view) -> BarChart:
    rows = [BarRow("1: A", [Segment(3, "3"), Segment(1, "1", series=1)], title="A")]
    return BarChart(views=[BarView(**{"name": "bytes", "axis": "Bytes", "rows": rows} | view)], series=SERIES)


def test_the_data_holds_every_row_segment_and_line_as_plain_values():
    data = bars_data(_chart(line=(4, "window 4")))
    (view,) = data["views"]
    assert view["rows"] == [{"label": "1: A", "title": "A", "segments": [
        {"value": 3.0, "text": "3", "series": 0, "title": ""}, {"value": 1.0, "text": "1", "series": 1, "title": ""}]}]
    assert view["line"] == {"at": 4.0, "label": "window 4"} and view["format"] == "number"
    assert data["series"] == [{"name": "in the token", "colour": "#0072B2"}, {"name": "held back", "colour": "#E69F00"}]
    assert data["mode"] == "group" and "line" not in bars_data(_chart())["views"][0]
    assert data["orientation"] == "rows" and view["scale"] == "linear"


def test_columns_on_a_log_axis_carry_their_orientation_category_and_scale():
    chart = BarChart(views=[BarView("allowed", "Tokens", [BarRow("1. {", [Segment(48_000, "48.0k")])], scale="log",
                                    line=(49_152, "vocabulary"))], series=SERIES, orientation="columns", category="Token")
    data = bars_data(chart)
    assert (data["orientation"], data["category"], data["views"][0]["scale"]) == ("columns", "Token", "log")


@pytest.mark.parametrize("chart, problem", [
    (BarChart(views=[], series=SERIES), "at least one view"),
    (BarChart(views=_chart().views, series=SERIES, mode="overlay"), "mode must be"),
    (_chart(format="%"), "format must be"),
    (_chart(rows=[BarRow("x", [Segment(math.nan)])]), "not finite"),
    (_chart(rows=[BarRow("x", [Segment(1, series=2)])]), "names series 2"),
    (_chart(line=(math.inf, "window")), "not at a value its axis can show"),
    (_chart(scale="sqrt"), "scale must be"),
    (_chart(scale="log", rows=[BarRow("x", [Segment(0)])]), "a log axis cannot show"),
    (_chart(scale="log", line=(0, "none")), "not at a value its axis can show"),
    (BarChart(views=_chart().views, series=SERIES, orientation="diagonal"), "orientation must be"),
])
def test_what_could_not_be_drawn_is_refused_with_its_reason(chart, problem):
    with pytest.raises(ValueError, match=problem):
        bars_data(chart)
