"""The Failures page's attempt timeline: bars where the attempts were, sleeps between them, as given."""

import pytest

from charts.failures import OUTCOME_COLOURS, attempts_timeline
from charts.theme import axis_title

LABELS = ["1 · 500", "2 · 500", "3 · 200"]
STARTS, ENDS = [0.01, 0.49, 1.43], [0.02, 0.50, 2.90]
SLEEPS = [0.47, 0.93]


def test_attempts_and_sleeps_are_drawn_where_they_happened():
    figure = attempts_timeline(LABELS, STARTS, ENDS, ["retried", "retried", "answered"], SLEEPS)
    bars = [trace for trace in figure.data if trace.type == "bar"]
    answered, retried, sleeps = sorted(bars, key=lambda trace: trace.name)
    marks = {trace.name: trace for trace in figure.data if trace.type == "scatter"}
    assert list(marks["arrived: retried"].x) == STARTS[:2] and list(marks["arrived: answered"].x) == STARTS[2:]
    assert (answered.name, retried.name, sleeps.name) == ("attempt: answered", "attempt: retried", "client sleeps")
    assert list(retried.y) == LABELS[:2] and list(retried.base) == STARTS[:2]
    assert list(retried.x) == pytest.approx([0.01, 0.01]) and list(answered.x) == pytest.approx([1.47])
    assert answered.marker.color == OUTCOME_COLOURS["answered"] != retried.marker.color
    assert list(sleeps.base) == ENDS[:2] and list(sleeps.x) == SLEEPS and list(sleeps.y) == LABELS[:2]
    assert list(sleeps.text) == ["slept 0.47 s", "slept 0.93 s"]
    assert list(figure.layout.yaxis.categoryarray) == LABELS[::-1]  # the first attempt on top
    assert figure.layout.xaxis.title.text == axis_title("Time since the call began", "s")


def test_a_single_attempt_has_no_sleep_bar():
    figure = attempts_timeline(["1 · 401"], [0.0], [0.01], ["gave up"], [])
    assert [trace.name for trace in figure.data] == ["attempt: gave up", "arrived: gave up"]


@pytest.mark.parametrize("args", [
    (LABELS, STARTS, ENDS[:2], ["retried"] * 3, SLEEPS),
    (LABELS, STARTS, ENDS, ["retried"] * 3, SLEEPS[:1]),
    (LABELS, STARTS, ENDS, ["retried", "retried", "exploded"], SLEEPS),
])
def test_inconsistent_input_is_refused(args):
    with pytest.raises(ValueError):
        attempts_timeline(*args)
