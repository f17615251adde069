"""The Request page's chart: tokens and bytes re-sent per turn, drawn from the numbers given."""

import pytest

from charts.request import resent_tokens_chart
from charts.theme import axis_title


def test_bars_split_each_turn_into_resent_and_new_tokens():
    figure = resent_tokens_chart([40, 95, 160], [10, 12, 9], [300, 700, 1200])
    resent, new, body = figure.data
    assert list(resent.x) == [1, 2, 3] and list(resent.y) == [30, 83, 151]
    assert list(new.y) == [10, 12, 9]
    assert [r + n for r, n in zip(resent.y, new.y)] == [40, 95, 160]
    assert list(new.text) == ["40", "95", "160"]  # each bar's total, on top
    assert list(body.y) == [300, 700, 1200] and body.yaxis == "y2"
    assert figure.layout.barmode == "stack"
    assert figure.layout.yaxis.title.text == axis_title("Prompt", "tokens")
    assert figure.layout.yaxis2.title.text == axis_title("Body", "bytes")
    assert figure.layout.xaxis2.title.text == "Turn"


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError):
        resent_tokens_chart([1, 2], [1], [1, 2])
