"""Next-token page charts: candidate bars in both scales and the log-log rank curve of the whole vocabulary."""

import math

import numpy as np
import pytest

from charts.next_token import BAR_LABEL_CHARS, candidate_bars, curve_ranks, rank_curve
from lifecycle.stages.sampling import TokenCandidate

CANDIDATES = [
    TokenCandidate(10, " blue", 0.6, math.log(0.6), 1),
    TokenCandidate(11, " red", 0.3, math.log(0.3), 2),
    TokenCandidate(12, "\n", 0.1, math.log(0.1), 3),
]


def test_probability_bars_carry_the_candidates_in_rank_order():
    figure = candidate_bars(CANDIDATES, "probability")
    bar = figure.data[0]
    assert list(bar.x) == [0.6, 0.3, 0.1]
    assert list(bar.y) == ["#1 ␣blue", "#2 ␣red", "#3 ↵"]
    assert [list(item) for item in bar.customdata] == [[10, "␣blue"], [11, "␣red"], [12, "↵"]]
    assert figure.layout.xaxis.title.text.startswith("Probability")


def test_a_long_token_label_is_cut_and_the_hover_keeps_it_whole():
    long = TokenCandidate(7, "<0xE0><0xA6>", 0.2, math.log(0.2), 13)
    bar = candidate_bars([long], "probability").data[0]
    assert bar.y[0] == "#13 &lt;0xE0&gt;&lt;0…"  # BAR_LABEL_CHARS characters shown, then escaped
    assert len("<0xE0><0…") == BAR_LABEL_CHARS
    assert bar.customdata[0][1] == "&lt;0xE0&gt;&lt;0xA6&gt;"  # escaped: Plotly renders a few HTML tags


def test_logprob_bars_use_natural_logs():
    figure = candidate_bars(CANDIDATES, "logprob")
    np.testing.assert_allclose(list(figure.data[0].x), [math.log(0.6), math.log(0.3), math.log(0.1)])
    assert figure.layout.xaxis.title.text.startswith("Log-probability")


def test_unknown_scale_is_refused():
    with pytest.raises(ValueError):
        candidate_bars(CANDIDATES, "percent")


def test_curve_ranks_cover_first_and_last_rank_without_repeats():
    ranks = curve_ranks(49_152)
    assert ranks[0] == 1 and ranks[-1] == 49_152
    assert np.all(np.diff(ranks) > 0) and len(ranks) < 700
    assert list(ranks[:100]) == list(range(1, 101))
    assert list(curve_ranks(5)) == [1, 2, 3, 4, 5]


def test_rank_curve_is_the_sorted_distribution_on_log_axes():
    probs = np.random.default_rng(0).dirichlet(np.full(2_000, 0.1))
    figure = rank_curve(probs)
    line = figure.data[0]
    ordered = np.sort(probs)[::-1]
    ranks = np.asarray(line.x)
    np.testing.assert_allclose(np.asarray(line.y), ordered[ranks - 1])
    np.testing.assert_allclose(np.asarray(line.customdata)[-1], 1.0)
    assert figure.layout.xaxis.type == "log" and figure.layout.yaxis.type == "log"
    assert "1 to 2,000" in figure.layout.xaxis.title.text  # the whole vocabulary is ranked
