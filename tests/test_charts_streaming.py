"""Streaming charts: gap bars equal the input gaps in ms; the timeline puts each event at its own time."""

import pytest

from charts.streaming import event_timeline, inter_token_latency
from charts.theme import axis_title


def test_inter_token_bars_are_the_gaps_in_ms_with_the_mean_marked():
    figure = inter_token_latency([0.05, 0.07, 0.06])
    bar = figure.data[0]
    assert list(bar.y) == pytest.approx([50.0, 70.0, 60.0])
    assert list(bar.x) == ["1→2", "2→3", "3→4"]
    assert figure.layout.yaxis.title.text == axis_title("Inter-token latency", "ms")
    assert figure.layout.shapes[0].y0 == pytest.approx(60.0)
    assert "60.0 ms" in figure.layout.annotations[0].text


def test_no_gaps_draws_no_mean_line():
    figure = inter_token_latency([])
    assert list(figure.data[0].y) == [] and not figure.layout.shapes


def test_timeline_has_one_trace_per_kind_with_event_numbers_and_times():
    at = [0.0, 0.3, 0.35, 0.41, 0.41, 0.42]
    kinds = ["role", "content", "content", "finish", "usage", "done"]
    figure = event_timeline(at, kinds)
    traces = {t.name: t for t in figure.data}
    assert list(traces) == ["role", "content", "finish", "usage", "done"]
    assert list(traces["content"].x) == pytest.approx([300.0, 350.0])
    assert list(traces["content"].y) == [2, 3]
    assert list(traces["done"].y) == [6]
    assert figure.layout.xaxis.title.text == axis_title("Time since the request started", "ms")
