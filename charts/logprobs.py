"""The generated text with every token highlighted by its log-probability, as OpenAI's Playground
shows ``logprobs``: unlikely tokens stand out; hovering a token lists the model's top alternatives."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import plotly.graph_objects as go

from charts.sampling import token_label
from charts.theme import TEMPLATE

LINE_CHARS = 38
ROW_HEIGHT = 40
MIN_ROWS_MID_TICK = 3  # rows from which the colour bar is long enough for a 50% tick
# Low probability warm and saturated, high probability pale: the eye goes to the surprises.
COLOURSCALE = [[0.0, "#d55e00"], [0.35, "#e69f00"], [0.7, "#f0e442"], [1.0, "#eef6e8"]]


def wrap_tokens(labels: Sequence[str], line_chars: int = LINE_CHARS) -> list[tuple[int, int]]:
    """(row, start column) of each token label laid out like text: a token that would cross the
    line's end starts a new row, and a row also ends after a token that holds a line break."""
    places, row, column = [], 0, 0
    for label in labels:
        width = max(1, len(label))
        if column and column + width > line_chars:
            row, column = row + 1, 0
        places.append((row, column))
        column += width
        if "↵" in label:
            row, column = row + 1, 0
    return places


def logprob_text_figure(
    texts: Sequence[str], logprobs: Sequence[float], alternatives: Sequence[Sequence[tuple[str, float]]],
    line_chars: int = LINE_CHARS,
) -> go.Figure:
    """One coloured box per generated token (its text inside), coloured by exp(logprob); the hover
    shows the logprob, the probability and the top alternatives with theirs."""
    labels = [token_label(text) for text in texts]
    widths = [max(1, len(html.unescape(label))) for label in labels]  # what shows, not the escaped form
    places = wrap_tokens([html.unescape(label) for label in labels], line_chars)
    probabilities = [math.exp(lp) if lp > -math.inf else 0.0 for lp in logprobs]
    hovers = [
        f"<b>{label}</b>  logprob {lp:.3f} (p = {p:.1%})<br>"
        + "<br>".join(f"{token_label(alt)}: {alt_lp:.3f}" for alt, alt_lp in alts)
        for label, lp, p, alts in zip(labels, logprobs, probabilities, alternatives)
    ]
    figure = go.Figure(
        go.Bar(
            y=[row for row, _ in places], base=[column for _, column in places], x=widths,
            orientation="h", width=0.86, text=labels, textposition="inside", insidetextanchor="middle", textangle=0,
            textfont=dict(family="monospace", size=16, color="#1a1a1a"), hovertext=hovers, hoverinfo="text",
            marker=dict(color=probabilities, colorscale=COLOURSCALE, cmin=0, cmax=1, line=dict(color="white", width=1),
                        colorbar=dict(title="p", tickformat=".0%", thickness=12, len=0.9)),
        )
    )
    rows = (places[-1][0] + 1) if places else 1
    # A one- or two-row chart has a short colour bar: three tick labels would sit on each other there.
    figure.update_traces(marker_colorbar=dict(tickvals=[0, 0.5, 1] if rows >= MIN_ROWS_MID_TICK else [0, 1]))
    figure.update_layout(
        template=TEMPLATE, showlegend=False, height=70 + rows * ROW_HEIGHT, margin=dict(l=8, r=8, t=8, b=8),
        uniformtext=dict(minsize=9, mode="show"), bargap=0,
        xaxis=dict(visible=False, range=[-0.5, line_chars + 0.5]),
        yaxis=dict(visible=False, autorange="reversed"),
    )
    return figure


def steps_logprob_figure(steps: Sequence, alternatives: int = 5, line_chars: int = LINE_CHARS) -> go.Figure:
    """``logprob_text_figure`` of generation steps (lifecycle.stages.generation.GenerationStep): each token's
    log-probability under the model, as the API's ``logprobs`` reports it, and its top alternatives."""
    from lifecycle.stages.vocabulary import token_display

    return logprob_text_figure(
        [step.text for step in steps],
        [step.logprob for step in steps],
        [[(token_display(alt.token_bytes), alt.logprob) for alt in step.top_logprobs[:alternatives]] for step in steps],
        line_chars,
    )
