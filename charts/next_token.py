"""Next-token charts: the top candidates (drawn in the browser on the page; in Plotly for the game and the handout) and
the whole vocabulary's rank-probability curve."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from charts.bars import BarChart, BarRow, BarView, Segment, Series, bars_data
from charts.sampling import token_label
from charts.theme import OKABE_ITO, TEMPLATE, axis_title
from lifecycle.stages.sampling import TokenCandidate
from lifecycle.stages.vocabulary import show_token

# The rank curve keeps every rank up to here, then log-spaced ranks: ~600 points instead of 49,152.
CURVE_EXACT_RANKS = 100
CURVE_POINTS = 500
# Longer token labels are cut (the hover shows the whole token): on a projector's half-width column
# a label like "#13 <0xE0><0xA6>" left the bars ~40 px.
BAR_LABEL_CHARS = 9


def candidate_chart(candidates: Sequence[TokenCandidate]) -> dict:
    """The top candidates as browser-drawn bars (ui.live_bars), most likely on top, in two views the reader
    switches between: probability and log-probability (natural log, what APIs return as ``logprobs``)."""
    def view(name: str, axis: str, values: list[float], texts: list[str], format: str) -> BarView:
        rows = [BarRow(f"#{c.rank} {_short_label(c.text)}", [Segment(v, t)], title=f"{show_token(c.text)} (id {c.id}): {v:.4f}")
                for c, v, t in zip(candidates, values, texts)]
        return BarView(name, axis, rows, format=format)

    probabilities = [c.probability for c in candidates]
    logprobs = [c.logprob for c in candidates]
    return bars_data(BarChart(
        views=[view("probability", "Probability (T = 1)", probabilities, [f"{p:.1%}" for p in probabilities], "percent"),
               view("log-probability", "Log-probability (nats)", logprobs, [f"{v:.2f}" for v in logprobs], "number")],
        series=[Series("candidate", OKABE_ITO[0])],
        toggle="Show",
        label=f"The top {len(candidates)} candidates for the next token",
    ))


def candidate_bars(candidates: Sequence[TokenCandidate]) -> go.Figure:
    """The top candidates' probabilities as Plotly bars, most likely on top (the game's answer and the handout,
    which carry their own copy of plotly.js)."""
    values = [c.probability for c in candidates]
    labels = [f"#{c.rank} {html.escape(_short_label(c.text), quote=False)}" for c in candidates]
    figure = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            marker_color=OKABE_ITO[0],
            text=[f"{v:.1%}" for v in values],
            textposition="auto",  # inside a long bar: the top candidate's label stays in the chart
            cliponaxis=False,
            customdata=[[c.id, token_label(c.text)] for c in candidates],
            hovertemplate="%{customdata[1]} (id %{customdata[0]}): %{x:.4f}<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(title=axis_title("Probability", "T = 1"), tickformat=".0%", range=[0, max(values) * 1.25]),
        yaxis=dict(type="category", autorange="reversed"),  # "#1 …" labels say what the rows are
        height=max(320, 30 * len(candidates) + 140),
        showlegend=False,
    )
    return figure


def _short_label(text: str) -> str:
    """The token as ``show_token`` writes it, cut to BAR_LABEL_CHARS characters."""
    shown = show_token(text)
    return shown if len(shown) <= BAR_LABEL_CHARS else shown[:BAR_LABEL_CHARS - 1] + "…"


def curve_ranks(vocab_size: int) -> np.ndarray:
    """The 1-based ranks the curve plots: all of the first ones, then log-spaced up to the last."""
    exact = np.arange(1, min(CURVE_EXACT_RANKS, vocab_size) + 1)
    spaced = np.geomspace(CURVE_EXACT_RANKS, vocab_size, CURVE_POINTS).round().astype(int)
    return np.unique(np.concatenate([exact, spaced[spaced <= vocab_size], [vocab_size]]))


def rank_curve(probs: np.ndarray) -> go.Figure:
    """Probability against rank for the whole vocabulary, both axes logarithmic."""
    ordered = np.sort(np.asarray(probs, dtype=np.float64))[::-1]
    ranks = curve_ranks(ordered.size)
    values = ordered[ranks - 1]
    cumulative = np.cumsum(ordered)[ranks - 1]
    figure = go.Figure(
        go.Scatter(
            x=ranks,
            y=values,
            mode="lines",
            line=dict(color=OKABE_ITO[0], width=3),
            customdata=cumulative,
            hovertemplate="rank %{x:,}: p = %{y:.2e}<br>top %{x:,} hold %{customdata:.1%}<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(title=axis_title("Rank", f"1 to {ordered.size:,}"), type="log"),
        yaxis=dict(title=axis_title("Probability", "log scale"), type="log", exponentformat="power"),
        height=460,
        showlegend=False,
    )
    return figure
