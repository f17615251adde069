"""The journey waterfall coloured by phase: bars stay one trace with the input numbers, the legend names the phases."""

from charts.journey import PHASE_COLOURS, latency_waterfall
from charts.theme import MUTED, axis_title


def test_phases_colour_each_bar_and_add_one_legend_entry_per_phase():
    durations = [("request", 0.0001), ("inspection pass", 0.3), ("prefill", 0.2), ("decode 1", 0.05)]
    phases = ["The client and the API", "Waiting for the engine", "Inside the model", "Back to the client"]
    figure = latency_waterfall(durations, phases)
    bar = figure.data[0]
    assert list(bar.y) == [name for name, _ in durations]
    assert list(bar.x) == [s * 1000 for _, s in durations]
    assert list(bar.base) == [0.0, 0.1, 300.1, 500.1]
    assert list(bar.marker.color) == [PHASE_COLOURS[p] for p in phases]
    assert bar.marker.color[1] == MUTED  # the app's own extra pass reads as "not part of the call"
    assert [t.name for t in figure.data[1:]] == phases
    assert all(t.showlegend for t in figure.data[1:]) and not bar.showlegend
    assert all(list(t.x) == [None] for t in figure.data[1:])  # legend entries carry no data
    assert figure.layout.xaxis.title.text == axis_title("Time since the request", "ms")


def test_repeated_phases_give_one_legend_entry_each():
    figure = latency_waterfall([("a", 0.1), ("b", 0.2), ("c", 0.3)],
                               ["Inside the model", "Inside the model", "Back to the client"])
    assert [t.name for t in figure.data[1:]] == ["Inside the model", "Back to the client"]


def test_without_phases_there_is_no_legend():
    figure = latency_waterfall([("tokenize", 0.002)])
    assert len(figure.data) == 1 and not figure.layout.showlegend
