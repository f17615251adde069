"""The journey map's latency waterfall: where the time of one call goes, stage by stage."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from charts.theme import LEGEND_BELOW, MUTED, OKABE_ITO, TEMPLATE, axis_title, wrap_label

# One colour per phase of ui/stages.py; time spent waiting for the engine is grey: no stage ran for this call.
PHASE_COLOURS = {
    "The client and the API": OKABE_ITO[0],
    "Inside the model": OKABE_ITO[1],
    "Back to the client": OKABE_ITO[2],
    "Waiting for the engine": MUTED,
}


def latency_waterfall(durations: Sequence[tuple[str, float]], phases: Sequence[str] | None = None) -> go.Figure:
    """Horizontal waterfall of (stage name, seconds) in order: each bar starts where the last ended.

    Times are shown in milliseconds; the first stage is at the top. ``phases`` (one per stage,
    keys of PHASE_COLOURS) colours the bars by phase, with a legend; the bars stay one trace.
    """
    names = [name for name, _ in durations]
    widths = [seconds * 1000 for _, seconds in durations]
    starts = [sum(widths[:i]) for i in range(len(widths))]
    colours = [PHASE_COLOURS.get(p, OKABE_ITO[0]) for p in phases] if phases else OKABE_ITO[0]
    figure = go.Figure(
        go.Bar(
            y=[wrap_label(name) for name in names],  # a long stage name on two lines keeps a phone's bars wide
            x=widths,
            base=starts,
            orientation="h",
            marker_color=colours,
            text=[f"{w:,.1f} ms" for w in widths],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:,.1f} ms<extra></extra>",
            showlegend=False,
        )
    )
    for phase in dict.fromkeys(phases or ()):  # legend entries only: no data of their own
        figure.add_trace(go.Bar(x=[None], y=[None], name=phase, marker_color=PHASE_COLOURS.get(phase, OKABE_ITO[0]),
                                orientation="h", showlegend=True, hoverinfo="skip"))
    figure.update_layout(
        template=TEMPLATE,
        yaxis=dict(autorange="reversed", title=None),
        height=max(260, 40 * len(names) + 160),
        showlegend=bool(phases),
        legend=LEGEND_BELOW,
        xaxis=dict(title=axis_title("Time since the request", "ms"), nticks=5),  # ticks stay apart on a phone
        barmode="overlay",
        margin=dict(r=120),  # room for the last bar's label
    )
    return figure
