"""Gateway page chart: a key's two token buckets (requests and tokens) over a burst of calls."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from charts.theme import OKABE_ITO, TEMPLATE, axis_title

ADMITTED, REFUSED = OKABE_ITO[2], OKABE_ITO[5]


def bucket_chart(
    times: Sequence[float],
    requests: Sequence[float],
    tokens: Sequence[float],
    call_times: Sequence[float],
    call_allowed: Sequence[bool],
    requests_limit: int,
    tokens_limit: int,
) -> go.Figure:
    """Two stacked panels sharing the time axis: the requests bucket and the tokens bucket.

    ``times``/``requests``/``tokens`` are the bucket levels to draw as lines (seconds from the
    first call); each call in ``call_times`` is marked at the top of both panels, green when
    admitted (200) and a red cross when refused (429). Dotted lines mark each bucket's capacity.
    """
    if not len(times) == len(requests) == len(tokens):
        raise ValueError("times, requests and tokens need one value per sample")
    if len(call_times) != len(call_allowed):
        raise ValueError("call_times and call_allowed need one value per call")
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                           subplot_titles=("Requests bucket", "Tokens bucket"))
    for row, (name, levels, limit, colour) in enumerate(
        (("requests", requests, requests_limit, OKABE_ITO[0]), ("tokens", tokens, tokens_limit, OKABE_ITO[1])),
        start=1,
    ):
        figure.add_trace(go.Scatter(
            x=list(times), y=list(levels), name=f"{name} left", mode="lines", line=dict(color=colour, width=3),
            hovertemplate=f"t=%{{x:.3f}} s: %{{y:,.1f}} {name} left<extra></extra>",
        ), row=row, col=1)
        figure.add_hline(y=limit, line_dash="dot", line_color="#444444", row=row, col=1,
                         annotation_text=f"capacity {limit:,}/min", annotation_position="bottom right")
        figure.update_yaxes(title_text=axis_title(f"{name.capitalize()} left", name), rangemode="tozero",
                            range=[0, limit * 1.25], row=row, col=1)
        for allowed, label, colour_, symbol in ((True, "admitted (200)", ADMITTED, "circle"),
                                                (False, "refused (429)", REFUSED, "x")):
            picked = [t for t, ok in zip(call_times, call_allowed) if ok is allowed]
            figure.add_trace(go.Scatter(
                x=picked, y=[limit * 1.12] * len(picked), mode="markers", name=label,
                marker=dict(color=colour_, symbol=symbol, size=13, line=dict(width=1, color="#222222")),
                showlegend=row == 1, legendgroup=label,
                hovertemplate=f"call at t=%{{x:.3f}} s: {label}<extra></extra>",
            ), row=row, col=1)
    figure.update_xaxes(title_text=axis_title("Time since the first call", "s"), row=2, col=1)
    figure.update_layout(template=TEMPLATE, height=620, legend=dict(orientation="h", yanchor="bottom", y=1.06, x=0))
    return figure
