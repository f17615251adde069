"""Generation page charts: one step's alternatives, and probability and time across the steps."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from charts.sampling import token_label
from charts.theme import OKABE_ITO, TEMPLATE, axis_title
from lifecycle.stages.generation import GenerationStep

CHOSEN, OTHER, PICKED = OKABE_ITO[1], OKABE_ITO[0], OKABE_ITO[3]
INSIDE_LABEL = 0.6  # bars longer than this (probability) show their label inside


def alternatives_figure(step: GenerationStep) -> go.Figure:
    """The step's top alternatives by the probability they were drawn with; the chosen one highlighted."""
    candidates = step.alternatives
    labels = [f"{c.rank}. {token_label(c.text)}" for c in candidates]
    figure = go.Figure(
        go.Bar(
            x=[c.probability for c in candidates], y=labels, orientation="h",
            marker_color=[CHOSEN if c.id == step.token_id else OTHER for c in candidates],
            text=[f"{c.probability:.1%}" + (" ← chosen" if c.id == step.token_id else "") for c in candidates],
            # A long bar carries its label inside, so the label never runs past the chart's right edge.
            textposition=["inside" if c.probability > INSIDE_LABEL else "outside" for c in candidates],
            insidetextanchor="end", insidetextfont=dict(color="white"), cliponaxis=False,
            hovertemplate="%{y}: %{x:.2%}<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE, showlegend=False, height=80 + 48 * len(candidates),
        margin=dict(t=20), xaxis=dict(title=axis_title("Probability after sampling", "%"), tickformat=".0%",
                                      range=[0, 1.25], tickvals=[0, 0.25, 0.5, 0.75, 1.0]),
        yaxis=dict(autorange="reversed", title=axis_title("Candidate, by rank")),
    )
    return figure


def steps_figure(steps: Sequence[GenerationStep], picked: Collection[int] = (), total: int | None = None) -> go.Figure:
    """Per step: the chosen token's probability (top) and the step's wall time in ms (bottom).

    Steps in ``picked`` (an alternative the reader chose) get their own colour; ``total`` fixes
    the step axis to the whole run, so the chart fills in as steps are revealed."""
    numbers = [s.index + 1 for s in steps]
    tokens = [token_label(s.text) for s in steps]
    colours = [PICKED if s.index in picked else CHOSEN for s in steps]
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                           subplot_titles=("Probability of the chosen token", "Time per step"))
    figure.add_trace(
        go.Scatter(name="Probability", x=numbers, y=[s.probability for s in steps], mode="lines+markers",
                   customdata=tokens, line=dict(color=OKABE_ITO[0]), marker=dict(size=11, color=colours),
                   hovertemplate="step %{x} %{customdata}: %{y:.1%}<extra></extra>"),
        row=1, col=1,
    )
    figure.add_trace(
        go.Bar(name="Time", x=numbers, y=[s.seconds * 1000 for s in steps], marker_color=OKABE_ITO[2],
               customdata=tokens, hovertemplate="step %{x} %{customdata}: %{y:.1f} ms<extra></extra>"),
        row=2, col=1,
    )
    figure.update_layout(template=TEMPLATE, showlegend=False, height=560)
    figure.update_yaxes(title_text=axis_title("Probability", "%"), tickformat=".0%", range=[0, 1.05], row=1, col=1)
    figure.update_yaxes(title_text=axis_title("Time", "ms"), rangemode="tozero", row=2, col=1)
    last = total or len(steps)
    figure.update_xaxes(range=[0.5, last + 0.5], dtick=1 if last <= 12 else None)  # more would collide
    figure.update_xaxes(title_text=axis_title("Step (generated token number)"), row=2, col=1)
    return figure
