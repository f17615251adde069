"""Failures page chart: one client call's attempts on a time axis, and the sleeps between them."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from charts.theme import MUTED, OKABE_ITO, TEMPLATE, axis_title

OUTCOME_COLOURS = {"answered": OKABE_ITO[2], "retried": OKABE_ITO[1], "gave up": OKABE_ITO[5]}
ROW_HEIGHT = 70


def attempts_timeline(labels: Sequence[str], starts: Sequence[float], ends: Sequence[float],
                      outcomes: Sequence[str], sleeps: Sequence[float]) -> go.Figure:
    """One row per attempt, first at the top: a bar from when the gateway received it (``starts``) to
    when the client was done with it (``ends``), coloured by ``outcomes`` ("answered", "retried",
    "gave up") with a diamond where it arrived, then a grey bar for the client's sleep before the next
    attempt (``sleeps``, one fewer).
    Times are seconds from the start of the call."""
    if not len(labels) == len(starts) == len(ends) == len(outcomes):
        raise ValueError("labels, starts, ends and outcomes need one value per attempt")
    if len(sleeps) != max(0, len(labels) - 1):
        raise ValueError("sleeps needs one value between every two attempts")
    unknown = set(outcomes) - set(OUTCOME_COLOURS)
    if unknown:
        raise ValueError(f"unknown outcomes {sorted(unknown)}; known: {list(OUTCOME_COLOURS)}")
    figure = go.Figure()
    for outcome, colour in OUTCOME_COLOURS.items():
        rows = [i for i, o in enumerate(outcomes) if o == outcome]
        if not rows:
            continue
        figure.add_trace(go.Bar(
            y=[labels[i] for i in rows], x=[max(ends[i] - starts[i], 0.0) for i in rows],
            base=[starts[i] for i in rows], orientation="h", name=f"attempt: {outcome}",
            marker=dict(color=colour, line=dict(width=1, color="#222222")),
            customdata=[[starts[i], ends[i]] for i in rows],
            hovertemplate="%{y}<br>from %{customdata[0]:.3f} s to %{customdata[1]:.3f} s<extra></extra>",
        ))
        figure.add_trace(go.Scatter(  # an answer in a few ms is too short to see as a bar: mark its arrival
            y=[labels[i] for i in rows], x=[starts[i] for i in rows], mode="markers", name=f"arrived: {outcome}",
            marker=dict(color=colour, symbol="diamond", size=16, line=dict(width=1, color="#222222")),
            legendgroup=f"attempt: {outcome}", showlegend=False,
            hovertemplate="%{y}: arrived at %{x:.3f} s<extra></extra>",
        ))
    if sleeps:
        figure.add_trace(go.Bar(
            y=list(labels[:-1]), x=list(sleeps), base=list(ends[:-1]), orientation="h", name="client sleeps",
            marker=dict(color=MUTED, pattern=dict(shape="/")), text=[f"slept {s:.2f} s" for s in sleeps],
            textposition="inside", insidetextanchor="middle",
            hovertemplate="%{y}: then slept %{x:.3f} s<extra></extra>",
        ))
    figure.update_yaxes(categoryorder="array", categoryarray=list(labels)[::-1], title_text="")
    figure.update_xaxes(title_text=axis_title("Time since the call began", "s"), rangemode="tozero")
    figure.update_layout(template=TEMPLATE, barmode="overlay", height=160 + ROW_HEIGHT * len(labels),
                         legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return figure
