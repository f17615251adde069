"""Detokenization chart: how many bytes each generated token carried, and how many waited for the next."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from charts.theme import OKABE_ITO, TEMPLATE, axis_title

MAX_Y_TICKS = 6


def bytes_per_token(labels: Sequence[str], token_bytes: Sequence[int], held_bytes: Sequence[int]) -> go.Figure:
    """Grouped bars per token: the bytes it carried, and the bytes of an unfinished character held after it."""
    figure = go.Figure([
        go.Bar(x=list(labels), y=list(token_bytes), name="bytes in the token", marker_color=OKABE_ITO[0],
               hovertemplate="%{x}: %{y} bytes<extra></extra>"),
        go.Bar(x=list(labels), y=list(held_bytes), name="bytes held back after it", marker_color=OKABE_ITO[5],
               marker_pattern_shape="/", hovertemplate="%{x}: %{y} bytes waiting<extra></extra>"),
    ])
    figure.update_layout(
        template=TEMPLATE,
        barmode="group",
        xaxis_title=axis_title("Token (step: text)"),
        yaxis_title=axis_title("Size", "bytes"),
        xaxis_type="category",
        # One tick per byte while that stays readable, else about six whole-number ticks.
        yaxis=dict(dtick=max(1, math.ceil(max([*token_bytes, *held_bytes, 1]) / MAX_Y_TICKS)), rangemode="tozero"),
        height=380,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
    )
    return figure
