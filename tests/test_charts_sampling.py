"""Sampling page charts, built from the real model's next-token logits: the figures carry the numbers."""

import numpy as np
import pytest

from charts.sampling import (
    cumulative_mass,
    nucleus_figure,
    samples_figure,
    survivors_after_stages,
    survivors_figure,
    token_label,
)
from lifecycle.stages.forward_pass import token_text
from lifecycle.stages.sampling import SamplingSettings, apply_sampling


@pytest.fixture(scope="module")
def text(loaded):
    return lambda i: token_text(loaded, i)


def by_name(figure, name):
    return next(trace for trace in figure.data if trace.name == name)


def test_token_labels_show_whitespace_and_never_carry_html():
    assert token_label(" the\n") == "␣the↵"
    assert token_label("<b>x</b>") == "&lt;b&gt;x&lt;/b&gt;"
    assert token_label('"') == '"'  # Plotly would print &quot; literally
    assert token_label("") == "∅"


def test_nucleus_curve_crosses_p_at_the_boundary(logits):
    settings = SamplingSettings(temperature=1.0, top_p=0.9)
    sampled = apply_sampling(logits, settings)
    probs = apply_sampling(logits, SamplingSettings(temperature=1.0)).final_probs
    cumulative = cumulative_mass(probs, 3 * sampled.kept)
    assert np.allclose(cumulative, np.cumsum(np.sort(probs)[::-1][: 3 * sampled.kept]))
    # The nucleus is the first rank where the curve reaches p.
    assert cumulative[sampled.kept - 1] >= 0.9 > cumulative[sampled.kept - 2]
    figure = nucleus_figure(cumulative, 0.9, sampled.kept)
    assert set(by_name(figure, "Nucleus boundary").x) == {sampled.kept}
    assert figure.layout.shapes[0].y0 == 0.9  # the top_p threshold line
    assert figure.layout.xaxis.type == "log"
    assert "Nucleus boundary" not in [t.name for t in nucleus_figure(cumulative, 1.0, None).data]


def test_survivors_count_down_stage_by_stage(logits):
    sampled = apply_sampling(logits, SamplingSettings(temperature=1.0, top_k=40, top_p=0.5))
    remaining = dict(survivors_after_stages(sampled))
    assert remaining["vocabulary"] == logits.size
    assert remaining["top-k"] == 40
    assert remaining["top-p"] == remaining["min-p"] == sampled.kept < 40
    figure = survivors_figure(list(remaining.items()))
    assert list(figure.data[0].x) == list(remaining.values())
    assert list(figure.data[0].y) == list(remaining)
    assert figure.layout.xaxis.type == "log"


def test_samples_figure_pairs_expected_and_observed():
    figure = samples_figure(["a", "b", "all other tokens"], [0.5, 0.3, 0.2], [0.52, 0.27, 0.21], 1000)
    assert list(figure.data[0].y) == [0.5, 0.3, 0.2]
    assert list(figure.data[1].y) == [0.52, 0.27, 0.21]
    assert figure.data[1].name == "Share of 1,000 draws"
    assert figure.layout.yaxis.title.text == "Share (%)"
