"""Streaming charts: when each server-sent event arrived, and the gaps between tokens."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from charts.theme import OKABE_ITO, TEMPLATE, axis_title

# Event kinds in the order a stream sends them, each with its colour and marker.
EVENT_STYLES = {
    "role": (OKABE_ITO[0], "diamond"),
    "content": (OKABE_ITO[2], "circle"),
    "finish": (OKABE_ITO[5], "square"),
    "usage": (OKABE_ITO[3], "triangle-up"),
    "done": (OKABE_ITO[7], "x"),
    "error": (OKABE_ITO[5], "x"),
}


def inter_token_latency(gaps_seconds: Sequence[float]) -> go.Figure:
    """One bar per gap between consecutive content events, in ms, with the mean as a dashed line."""
    gaps = [g * 1000 for g in gaps_seconds]
    labels = [f"{i + 1}→{i + 2}" for i in range(len(gaps))]
    figure = go.Figure(
        go.Bar(x=labels, y=gaps, marker_color=OKABE_ITO[0], name="gap",
               hovertemplate="content event %{x}: %{y:,.1f} ms<extra></extra>")
    )
    if gaps:
        mean = sum(gaps) / len(gaps)
        figure.add_hline(y=mean, line_dash="dash", line_color=OKABE_ITO[5],
                         annotation_text=f"mean {mean:,.1f} ms", annotation_position="top right",
                         annotation_bgcolor="white")
    figure.update_layout(
        template=TEMPLATE,
        xaxis_title=axis_title("Between content events"),
        yaxis_title=axis_title("Inter-token latency", "ms"),
        xaxis_type="category",
        height=380,
        showlegend=False,
    )
    return figure


def event_timeline(at_seconds: Sequence[float], kinds: Sequence[str]) -> go.Figure:
    """Every event as a point on a time axis (ms since the request), one trace per event kind."""
    figure = go.Figure()
    for kind, (colour, symbol) in EVENT_STYLES.items():
        times = [t * 1000 for t, k in zip(at_seconds, kinds) if k == kind]
        numbers = [i + 1 for i, k in enumerate(kinds) if k == kind]
        if times:
            figure.add_trace(go.Scatter(
                x=times, y=numbers, mode="markers", name=kind, marker=dict(color=colour, symbol=symbol, size=12),
                hovertemplate=f"event %{{y}} ({kind}) at %{{x:,.1f}} ms<extra></extra>",
            ))
    figure.update_layout(
        template=TEMPLATE,
        xaxis_title=axis_title("Time since the request started", "ms"),
        yaxis_title=axis_title("Event number"),
        height=380,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
    )
    return figure
