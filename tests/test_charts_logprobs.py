"""The logprob highlighting chart: tokens laid out like text, coloured by probability, escaped."""

import math

import numpy as np

from charts.logprobs import logprob_text_figure, wrap_tokens
from charts.structured import mask_bars


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


def test_mask_chart_has_one_column_per_step_and_marks_overruled_steps():
    data = mask_bars(["{\"", "name", "<b>"], [1, 29, 48782], [False, True, False], 49152)
    (view,) = data["views"]
    rows = view["rows"]
    assert [r["segments"][0]["value"] for r in rows] == [1, 29, 48782] and rows[2]["label"] == "3. <b>"  # plain text
    assert [r["segments"][0]["series"] for r in rows] == [0, 1, 0]
    assert [r["segments"][0]["text"] for r in rows] == ["", "29", "48.8k"]  # forced steps (1 allowed) stay unlabelled
    repeated = mask_bars(["a", "b", "c", "d"], [48782, 48765, 5, 48782], [False] * 4, 49152)["views"][0]["rows"]
    assert [r["segments"][0]["text"] for r in repeated] == ["48.8k", "", "5", "48.8k"]  # a run of equal counts once
    assert view["scale"] == "log" and view["line"]["at"] == 49152 and data["orientation"] == "columns"


def test_drawn_from_lists_only_tokens_still_in_play(logits):
    from charts.sampling import drawn_from_figure
    from lifecycle.stages.sampling import SamplingSettings, apply_sampling

    allowed = np.zeros(logits.size, dtype=bool)
    allowed[[5, 9, 700]] = True
    sampled = apply_sampling(logits, SamplingSettings(temperature=1.0), allowed=allowed)
    bar = drawn_from_figure(sampled, lambda i: f"t{i}").data[0]
    assert len(bar.y) == 3 and np.isclose(sum(bar.x), 1.0)
    assert sorted(bar.customdata) == sorted(sampled.base_probs[[5, 9, 700]].tolist())
