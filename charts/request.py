"""Request page chart: what a stateless API makes the client send again on every turn."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from charts.theme import MUTED, OKABE_ITO, TEMPLATE, axis_title


def resent_tokens_chart(
    prompt_tokens: Sequence[int], new_tokens: Sequence[int], payload_bytes: Sequence[int]
) -> go.Figure:
    """Per turn (1, 2, ...), two panels sharing the turn axis: on top, stacked bars of the prompt's
    tokens split into what is sent again (template, system prompt, every earlier turn) and the new
    message; below, the JSON body's size in bytes."""
    if not len(prompt_tokens) == len(new_tokens) == len(payload_bytes):
        raise ValueError("prompt_tokens, new_tokens and payload_bytes need one value per turn")
    turns = list(range(1, len(prompt_tokens) + 1))
    resent = [total - new for total, new in zip(prompt_tokens, new_tokens)]
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.65, 0.35], vertical_spacing=0.08)
    figure.add_trace(go.Bar(
        x=turns, y=resent, name="sent again (template, system, earlier turns)", marker_color=MUTED,
        hovertemplate="turn %{x}: %{y:,} tokens sent again<extra></extra>",
    ), row=1, col=1)
    figure.add_trace(go.Bar(
        x=turns, y=list(new_tokens), name="new message", marker_color=OKABE_ITO[0],
        text=[f"{total:,}" for total in prompt_tokens], textposition="outside", cliponaxis=False,
        hovertemplate="turn %{x}: %{y:,} new tokens<extra></extra>",
    ), row=1, col=1)
    figure.add_trace(go.Bar(
        x=turns, y=list(payload_bytes), name="JSON body", marker_color=OKABE_ITO[1], showlegend=False,
        text=[f"{size:,} B" for size in payload_bytes], textposition="outside", cliponaxis=False,
        hovertemplate="turn %{x}: %{y:,} bytes on the wire<extra></extra>",
    ), row=2, col=1)
    figure.update_yaxes(title_text=axis_title("Prompt", "tokens"), rangemode="tozero", row=1, col=1)
    figure.update_yaxes(title_text=axis_title("Body", "bytes"), rangemode="tozero", row=2, col=1)
    figure.update_xaxes(title_text=axis_title("Turn"), tickmode="array", tickvals=turns, row=2, col=1)
    figure.update_layout(
        template=TEMPLATE,
        barmode="stack",
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        height=560,
    )
    return figure
