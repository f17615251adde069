"""Next-token page charts: the top candidates and the whole vocabulary's rank-probability curve."""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

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


def candidate_bars(candidates: Sequence[TokenCandidate], scale: str = "probability") -> go.Figure:
    """Horizontal bars of the top candidates, most likely on top; ``scale`` is "probability" or "logprob"."""
    if scale not in ("probability", "logprob"):
        raise ValueError(f"scale must be 'probability' or 'logprob', got {scale!r}")
    values = [c.probability if scale == "probability" else c.logprob for c in candidates]
    labels = [f"#{c.rank} {_short_label(c.text)}" for c in candidates]
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
            customdata=[[c.id, token_label(c.text)] for c in candidates],
            hovertemplate="%{customdata[1]} (id %{customdata[0]}): %{x:.4f}<extra></extra>",
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
        yaxis=dict(type="category", autorange="reversed"),  # "#1 …" labels say what the rows are
        height=max(320, 30 * len(candidates) + 140),
        showlegend=False,
    )
    return figure


def _short_label(text: str) -> str:
    """The token as ``show_token`` writes it, cut to BAR_LABEL_CHARS characters, escaped for Plotly."""
    shown = show_token(text)
    if len(shown) > BAR_LABEL_CHARS:
        shown = shown[:BAR_LABEL_CHARS - 1] + "…"
    return html.escape(shown, quote=False)


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
