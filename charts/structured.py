"""Structured-output page chart: how many tokens of the vocabulary the grammar mask let through at
each step of one constrained generation."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from charts.sampling import token_label
from charts.theme import OKABE_ITO, TEMPLATE, axis_title

AGREED, OVERRULED = OKABE_ITO[2], OKABE_ITO[5]


def _count_label(allowed: int) -> str:
    """Bar labels short enough not to collide: none on forced steps (1), thousands as "48.8k"."""
    if allowed <= 1:
        return ""
    return f"{allowed / 1000:.1f}k" if allowed >= 10_000 else f"{allowed:,}"


def count_labels(allowed: Sequence[int]) -> list[str]:
    """``_count_label`` per bar, written only on the first bar of a run that reads the same: side by
    side, "48.8k" over "48.8k" ran into each other."""
    labels = [_count_label(a) for a in allowed]
    return [label if i == 0 or label != labels[i - 1] else "" for i, label in enumerate(labels)]


def mask_figure(tokens: Sequence[str], allowed: Sequence[int], overruled: Sequence[bool], vocabulary: int) -> go.Figure:
    """One bar per generated token: how many tokens the mask allowed there (log axis, the whole
    vocabulary as a dashed line); bars where the model's own favourite was masked out are marked."""
    labels = [f"{i}. {token_label(t)}" for i, t in enumerate(tokens, start=1)]
    colours = [OVERRULED if o else AGREED for o in overruled]
    figure = go.Figure(
        go.Bar(
            x=labels, y=list(allowed), marker_color=colours, text=count_labels(allowed),
            textposition="outside", textfont=dict(size=12), constraintext="none",
            cliponaxis=False, customdata=["mask overruled the model" if o else "model's favourite allowed" for o in overruled],
            hovertemplate="step %{x}: %{y:,} tokens allowed<br>%{customdata}<extra></extra>",
        )
    )
    # The line's meaning is in the page's caption: its annotation landed off the chart on the log axis, and
    # beside the line it would run into the bar labels.
    figure.add_hline(y=vocabulary, line_dash="dash", line_color="grey")
    figure.update_layout(
        template=TEMPLATE, showlegend=False, height=380,
        # Upright labels: slanted ones ran into their neighbours where Plotly showed every second token.
        xaxis=dict(title=axis_title("Generated token"), tickangle=-90, tickfont=dict(size=14)),
        yaxis=dict(title=axis_title("Tokens the mask allows", "log scale"), type="log", dtick=1, tickformat=",",
                   range=[-0.2, math.log10(vocabulary) + 0.6]),
    )
    return figure
