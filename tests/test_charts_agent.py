"""Agents page charts: the bars are the given shares and differences, labelled with their counts."""

import math

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


@pytest.mark.parametrize(("largest", "narrowest"), [([1.6e-5, 4.0e-5, 6.1e-5, 2.7e-5], 0.0352),
                                                     ([5.9e-5, 0.0], 0.0168), ([3e-3, 4e-3], 0.007)])
def test_the_roads_axis_labels_powers_of_ten_only_and_holds_every_bar_and_the_line(largest, narrowest):
    """Labels at powers of ten alone (Plotly's 2 and 5 between them ran into the powers on a phone), two to five of
    them (ten, for an exact road's floor at 1e-9, ran into each other too), over whole decades that hold every bar
    and the dashed line."""
    axis = roads_figure(["batch", "one pass", "chunked prefill", "other threads"][:len(largest)], largest,
                        narrowest).layout.yaxis
    low, high = axis.range
    labels = math.floor((high - low) / axis.dtick) + 1
    assert axis.tick0 == low == int(low) and axis.dtick == int(axis.dtick) >= 1 and 2 <= labels <= 5
    for value in [max(v, 1e-9) for v in largest] + [narrowest / 2]:
        assert low <= math.log10(value) <= high - 0.5


def test_round_rows_stack_the_cached_tokens_under_the_new_ones():
    data = round_bars([120, 180], [0, 117], ["get_weather", "answer (stop)"])
    rows = data["views"][0]["rows"]
    assert [row["label"] for row in rows] == ["round 1: get_weather", "round 2: answer (stop)"]
    assert [[s["value"] for s in row["segments"]] for row in rows] == [[0, 120], [117, 63]]
    assert [[s["text"] for s in row["segments"]] for row in rows] == [["", "120"], ["117", "63"]]  # no "0" drawn
    assert data["mode"] == "stack" and [s["name"] for s in data["series"]] == ["served by the prefix cache",
                                                                                "computed anew"]
