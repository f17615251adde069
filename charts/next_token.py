"""Next-token page charts: the top candidates and the whole vocabulary's rank-probability curve."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from charts.sampling import token_label
from charts.theme import OKABE_ITO, TEMPLATE, axis_title
from lifecycle.sampling import TokenCandidate

# The rank curve keeps every rank up to here, then log-spaced ranks: ~600 points instead of 49,152.
CURVE_EXACT_RANKS = 100
CURVE_POINTS = 500


def candidate_bars(candidates: Sequence[TokenCandidate], scale: str = "probability") -> go.Figure:
    """Horizontal bars of the top candidates, most likely on top; ``scale`` is "probability" or "logprob"."""
    if scale not in ("probability", "logprob"):
        raise ValueError(f"scale must be 'probability' or 'logprob', got {scale!r}")
    values = [c.probability if scale == "probability" else c.logprob for c in candidates]
    labels = [f"#{c.rank} {token_label(c.text)}" for c in candidates]
    text = [f"{v:.1%}" if scale == "probability" else f"{v:.2f}" for v in values]
    figure = go.Figure(
        go.Bar(
            x=values,
            y=labels,
            orientation="h",
            marker_color=OKABE_ITO[0],
            text=text,
            textposition="auto",  # inside a long bar: the top candidate's label stays in the chart
            cliponaxis=False,
            customdata=[c.id for c in candidates],
            hovertemplate="%{y} (id %{customdata}): %{x:.4f}<extra></extra>",
        )
    )
    xaxis = (
        dict(title=axis_title("Probability", "T = 1"), tickformat=".0%", range=[0, max(values) * 1.25])
        if scale == "probability"
        else dict(title=axis_title("Log-probability", "nats"))
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis=xaxis,
        yaxis=dict(title=axis_title("Candidate token"), type="category", autorange="reversed"),
        height=max(320, 30 * len(candidates) + 140),
        showlegend=False,
    )
    return figure


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
