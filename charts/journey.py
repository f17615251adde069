"""The journey map's latency waterfall: where the time of one call goes, stage by stage."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from charts.theme import OKABE_ITO, TEMPLATE, axis_title


def latency_waterfall(durations: Sequence[tuple[str, float]]) -> go.Figure:
    """Horizontal waterfall of (stage name, seconds) in order: each bar starts where the last ended.

    Times are shown in milliseconds; the first stage is at the top.
    """
    names = [name for name, _ in durations]
    widths = [seconds * 1000 for _, seconds in durations]
    starts = [sum(widths[:i]) for i in range(len(widths))]
    figure = go.Figure(
        go.Bar(
            y=names,
            x=widths,
            base=starts,
            orientation="h",
            marker_color=OKABE_ITO[0],
            text=[f"{w:,.1f} ms" for w in widths],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:,.1f} ms<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis_title=axis_title("Time since the request started", "ms"),
        yaxis=dict(autorange="reversed", title=None),
        height=max(260, 48 * len(names) + 120),
        showlegend=False,
    )
    return figure
