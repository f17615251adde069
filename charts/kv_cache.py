"""KV cache page charts: how the cache grows, prefill against decode time, and what a prefix cache serves per turn."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from charts.theme import LEGEND_BELOW, MUTED, OKABE_ITO, TEMPLATE, axis_title

MIB = 2**20


def cache_growth(bytes_per_token: int, multi_head_bytes_per_token: int, window: int,
                 marks: Sequence[tuple[str, int]]) -> go.Figure:
    """Cache size against positions from 1 to the window, with grouped-query and full multi-head attention;
    ``marks`` are (label, positions) points of this run. Both axes are logarithmic, so a short prompt and the
    whole window fit one chart and the two lines run parallel, a constant factor apart."""
    positions = np.unique(np.geomspace(1, window, 60).round().astype(int))
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=positions, y=positions * multi_head_bytes_per_token / MIB, mode="lines",
                                name="if every query head had its own K/V", line=dict(color=MUTED, dash="dash", width=3),
                                hovertemplate="%{x:,} positions: %{y:,.2f} MiB<extra></extra>"))
    figure.add_trace(go.Scatter(x=positions, y=positions * bytes_per_token / MIB, mode="lines",
                                name="this model (grouped-query)", line=dict(color=OKABE_ITO[0], width=3),
                                hovertemplate="%{x:,} positions: %{y:,.2f} MiB<extra></extra>"))
    for index, (label, count) in enumerate(marks):
        figure.add_trace(go.Scatter(x=[count], y=[count * bytes_per_token / MIB], mode="markers", name=label,
                                    marker=dict(size=13, color=OKABE_ITO[[1, 5, 2][index % 3]]),
                                    hovertemplate=f"{label}: %{{x:,}} positions, %{{y:,.2f}} MiB<extra></extra>"))
    # The legend below the plot: inside it, the legend covers the lines on a phone.
    figure.update_layout(template=TEMPLATE, height=480, legend=LEGEND_BELOW,
                         xaxis=dict(title="Positions in the cache<br>(tokens, log scale)", type="log"),  # two lines fit a phone
                         yaxis=dict(title=axis_title("Cache size", "MiB, log scale"), type="log"))
    return figure


def latency_chart(prompt_tokens: Sequence[int], prefill_ms: Sequence[float], decode_ms: Sequence[float],
                  this_prompt: int) -> go.Figure:
    """Prefill time and one decode step's time against prompt length (measured)."""
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=list(prompt_tokens), y=list(prefill_ms), mode="lines+markers",
                                name="prefill (time to first token)", line=dict(color=OKABE_ITO[5], width=3),
                                hovertemplate="%{x:,} tokens: prefill %{y:,.0f} ms<extra></extra>"))
    figure.add_trace(go.Scatter(x=list(prompt_tokens), y=list(decode_ms), mode="lines+markers",
                                name="one decode step (inter-token latency)", line=dict(color=OKABE_ITO[0], width=3),
                                hovertemplate="%{x:,} tokens in the cache: %{y:,.0f} ms per token<extra></extra>"))
    figure.add_vline(x=this_prompt, line=dict(color=OKABE_ITO[1], dash="dot", width=2))
    figure.add_annotation(x=this_prompt, y=1, yref="paper", text="this prompt", showarrow=False, xanchor="left",
                          yanchor="top", font=dict(color=OKABE_ITO[1]))
    figure.update_layout(template=TEMPLATE, height=440, legend=LEGEND_BELOW,
                         xaxis=dict(title=axis_title("Prompt length", "tokens"), rangemode="tozero"),
                         yaxis=dict(title=axis_title("Wall time", "ms"), rangemode="tozero"))
    return figure


def turns_chart(turns: Sequence[int], cached: Sequence[int], computed: Sequence[int],
                served_ms: Sequence[float], cold_ms: Sequence[float]) -> go.Figure:
    """Per turn: prompt tokens served from the cache vs computed (left), prefill time served vs from scratch (right)."""
    labels = [f"turn {t}" for t in turns]
    # One above the other: side by side, each half of a phone was narrower than its own title.
    figure = make_subplots(rows=2, cols=1, vertical_spacing=0.2,
                           subplot_titles=("Prompt tokens re-sent", "Prefill time"))
    figure.add_trace(go.Bar(x=labels, y=list(cached), name="from the prefix cache", marker_color=OKABE_ITO[2],
                            hovertemplate="%{x}: %{y:,} cached tokens<extra></extra>"), row=1, col=1)
    figure.add_trace(go.Bar(x=labels, y=list(computed), name="computed", marker_color=OKABE_ITO[5],
                            hovertemplate="%{x}: %{y:,} computed tokens<extra></extra>"), row=1, col=1)
    figure.add_trace(go.Bar(x=labels, y=list(cold_ms), name="from scratch", marker_color=MUTED,
                            hovertemplate="%{x}: %{y:,.0f} ms without a cache<extra></extra>"), row=2, col=1)
    figure.add_trace(go.Bar(x=labels, y=list(served_ms), name="as served", marker_color=OKABE_ITO[0],
                            hovertemplate="%{x}: %{y:,.0f} ms as served<extra></extra>"), row=2, col=1)
    figure.update_layout(template=TEMPLATE, height=640, barmode="group", legend=LEGEND_BELOW)
    figure.update_traces(selector=dict(name="from the prefix cache"), offsetgroup="tokens")
    figure.update_traces(selector=dict(name="computed"), offsetgroup="tokens", base=list(cached))
    figure.update_yaxes(title_text=axis_title("Tokens"), row=1, col=1)
    figure.update_yaxes(title_text=axis_title("Prefill", "ms"), row=2, col=1)
    return figure
