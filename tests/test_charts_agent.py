"""Agents page charts: the bars are the given shares and differences, labelled with their counts."""

import pytest

from charts.agent import compliance_figure, round_bars, roads_figure
from charts.theme import axis_title


def test_compliance_bars_are_percentages_with_counts():
    figure = compliance_figure(["no rule", "rule in the system prompt"], [0.25, 0.5], [3, 6], 12)
    first, draws = figure.data
    assert list(first.y) == pytest.approx([25.0, 50.0])
    assert list(draws.y) == pytest.approx([25.0, 50.0])
    assert list(draws.text) == ["3 of 12", "6 of 12"]
    assert list(first.text) == ["25%", "50%"]
    assert "of 12" in draws.name
    assert figure.layout.yaxis.title.text == axis_title("Says the forbidden phrase", "%")


def test_roads_bars_are_the_differences_with_half_the_margin_as_the_line():
    figure = roads_figure(["batch", "one pass"], [5.9e-5, 0.0], 0.0168)
    bar = figure.data[0]
    assert list(bar.y) == pytest.approx([5.9e-5, 1e-9])  # an exact road still shows, at the axis floor
    assert list(bar.text) == ["5.9e-05", "0 (exact)"]
    # A pick flips only when both of the two best logits move toward each other: by half the gap each at least.
    assert figure.layout.shapes[0].y0 == pytest.approx(0.0168 / 2)
    assert figure.layout.yaxis.type == "log"


def test_round_rows_stack_the_cached_tokens_under_the_new_ones():
    data = round_bars([120, 180], [0, 117], ["get_weather", "answer (stop)"])
    rows = data["views"][0]["rows"]
    assert [row["label"] for row in rows] == ["round 1: get_weather", "round 2: answer (stop)"]
    assert [[s["value"] for s in row["segments"]] for row in rows] == [[0, 120], [117, 63]]
    assert [[s["text"] for s in row["segments"]] for row in rows] == [["", "120"], ["117", "63"]]  # no "0" drawn
    assert data["mode"] == "stack" and [s["name"] for s in data["series"]] == ["served by the prefix cache",
                                                                                "computed anew"]
