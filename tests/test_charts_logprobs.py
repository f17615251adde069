"""The logprob highlighting chart: tokens laid out like text, coloured by probability, escaped."""

import math

import numpy as np

from charts.logprobs import logprob_text_figure, wrap_tokens
from charts.structured import mask_figure


def test_tokens_wrap_at_the_line_end_and_after_line_breaks():
    assert wrap_tokens(["Hello", ",", "␣world"], line_chars=12) == [(0, 0), (0, 5), (0, 6)]
    assert wrap_tokens(["Hello", ",", "␣world"], line_chars=10) == [(0, 0), (0, 5), (1, 0)]
    assert wrap_tokens(["a↵", "b", "c"], line_chars=40) == [(0, 0), (1, 0), (1, 1)]
    assert wrap_tokens(["x" * 30, "y"], line_chars=10) == [(0, 0), (1, 0)]  # a long token keeps its own row


def test_boxes_are_coloured_by_probability_and_labels_are_escaped():
    figure = logprob_text_figure(["The", " <b>", "!"], [math.log(0.9), math.log(0.05), -math.inf],
                                 [[("The", math.log(0.9)), ("A", math.log(0.05))], [], []], line_chars=20)
    bar = figure.data[0]
    assert np.allclose(bar.marker.color, [0.9, 0.05, 0.0])
    assert list(bar.text) == ["The", "␣&lt;b&gt;", "!"]
    assert list(bar.base) == [0, 3, 7] and list(bar.x) == [3, 4, 1]  # widths of what shows: "␣<b>" is 4
    assert "logprob -0.105 (p = 90.0%)" in bar.hovertext[0] and "A: -2.996" in bar.hovertext[0]


def test_mask_chart_has_one_bar_per_step_and_marks_overruled_steps():
    figure = mask_figure(["{\"", "name", "<b>"], [1, 29, 48782], [False, True, False], 49152)
    bar = figure.data[0]
    assert list(bar.y) == [1, 29, 48782] and bar.x[2] == "3. &lt;b&gt;"
    assert bar.marker.color[1] != bar.marker.color[0] == bar.marker.color[2]
    assert list(bar.text) == ["", "29", "48.8k"]  # forced steps (1 allowed) stay unlabelled
    repeated = mask_figure(["a", "b", "c", "d"], [48782, 48765, 5, 48782], [False] * 4, 49152).data[0]
    assert list(repeated.text) == ["48.8k", "", "5", "48.8k"]  # a run of equal counts is labelled once
    assert figure.layout.shapes[0].y0 == 49152


def test_drawn_from_lists_only_tokens_still_in_play(logits):
    from charts.sampling import drawn_from_figure
    from lifecycle.stages.sampling import SamplingSettings, apply_sampling

    allowed = np.zeros(logits.size, dtype=bool)
    allowed[[5, 9, 700]] = True
    sampled = apply_sampling(logits, SamplingSettings(temperature=1.0), allowed=allowed)
    bar = drawn_from_figure(sampled, lambda i: f"t{i}").data[0]
    assert len(bar.y) == 3 and np.isclose(sum(bar.x), 1.0)
    assert sorted(bar.customdata) == sorted(sampled.base_probs[[5, 9, 700]].tolist())
