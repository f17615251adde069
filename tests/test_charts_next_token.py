"""Next-token charts: candidate bars (browser-drawn in both views; Plotly) and the log-log rank curve of the vocabulary."""

import math

import numpy as np

from charts.next_token import BAR_LABEL_CHARS, candidate_bars, candidate_chart, curve_ranks, rank_curve
from lifecycle.stages.sampling import TokenCandidate

CANDIDATES = [
    TokenCandidate(10, " blue", 0.6, math.log(0.6), 1),
    TokenCandidate(11, " red", 0.3, math.log(0.3), 2),
    TokenCandidate(12, "\n", 0.1, math.log(0.1), 3),
]


def test_the_bars_carry_the_candidates_in_rank_order_in_both_views():
    chart = candidate_chart(CANDIDATES)
    probability, logprob = chart["views"]
    assert [r["label"] for r in probability["rows"]] == ["#1 ␣blue", "#2 ␣red", "#3 ↵"]
    assert [r["segments"][0]["value"] for r in probability["rows"]] == [0.6, 0.3, 0.1]
    assert [r["segments"][0]["text"] for r in probability["rows"]] == ["60.0%", "30.0%", "10.0%"]
    assert probability["format"] == "percent" and probability["axis"].startswith("Probability")
    np.testing.assert_allclose([r["segments"][0]["value"] for r in logprob["rows"]],
                               [math.log(0.6), math.log(0.3), math.log(0.1)])
    assert [r["segments"][0]["text"] for r in logprob["rows"]] == ["-0.51", "-1.20", "-2.30"]
    assert logprob["axis"].startswith("Log-probability") and chart["toggle"] == "Show"
    assert probability["rows"][0]["title"] == "␣blue (id 10): 0.6000"


def test_a_long_token_label_is_cut_and_the_hover_keeps_it_whole_unescaped():
    long = TokenCandidate(7, "<0xE0><0xA6>", 0.2, math.log(0.2), 13)
    row = candidate_chart([long])["views"][0]["rows"][0]
    assert row["label"] == "#13 <0xE0><0…"  # BAR_LABEL_CHARS characters shown; the browser sets it as text
    assert len("<0xE0><0…") == BAR_LABEL_CHARS
    assert row["title"].startswith("<0xE0><0xA6> (id 7)")


def test_the_plotly_bars_carry_the_candidates_in_rank_order_escaped():
    figure = candidate_bars(CANDIDATES)
    bar = figure.data[0]
    assert list(bar.x) == [0.6, 0.3, 0.1]
    assert list(bar.y) == ["#1 ␣blue", "#2 ␣red", "#3 ↵"]
    assert [list(item) for item in bar.customdata] == [[10, "␣blue"], [11, "␣red"], [12, "↵"]]
    assert figure.layout.xaxis.title.text.startswith("Probability")
    long = TokenCandidate(7, "<0xE0><0xA6>", 0.2, math.log(0.2), 13)
    bar = candidate_bars([long]).data[0]
    assert bar.y[0] == "#13 &lt;0xE0&gt;&lt;0…"  # escaped: Plotly renders a few HTML tags
    assert bar.customdata[0][1] == "&lt;0xE0&gt;&lt;0xA6&gt;"


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
