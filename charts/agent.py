"""Agents page charts: each round's prompt (what the prefix cache served and what was new), how often the
forbidden phrase comes out in each case, and how far each road's logits land from the alone road's against
the gap a greedy pick would need to flip."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go

from charts.bars import BarChart, BarRow, BarView, Segment, Series, bars_data
from charts.theme import LEGEND_BELOW, MUTED, OKABE_ITO, TEMPLATE, axis_title, wrap_label

FIRST_TOKEN, DRAWS = OKABE_ITO[0], OKABE_ITO[1]  # blue and orange, as the page's caption names them


def round_bars(prompt_tokens: Sequence[int], cached_tokens: Sequence[int], replies: Sequence[str]) -> dict:
    """One stacked row per round of the loop (ui.live_bars): the prompt tokens the prefix cache served, then the
    ones computed anew; each row labelled with what the round sent back (a tool call, or the answer)."""
    rows = []
    for index, (prompt, cached, reply) in enumerate(zip(prompt_tokens, cached_tokens, replies), start=1):
        rows.append(BarRow(f"round {index}: {reply}", [
            Segment(cached, f"{cached:,}" if cached else "", series=0, title=f"round {index}: {cached:,} tokens from the cache"),
            Segment(prompt - cached, f"{prompt - cached:,}", series=1,
                    title=f"round {index}: {prompt - cached:,} tokens computed anew"),
        ], title=f"round {index}: {prompt:,} prompt tokens sent; the model replied {reply}"))
    return bars_data(BarChart(
        views=[BarView("prompt", "Prompt tokens sent in the round", rows)],
        series=[Series("served by the prefix cache", MUTED), Series("computed anew", OKABE_ITO[0])],
        mode="stack", legend=True, label=f"The prompt of each of {len(rows)} rounds",
    ))


def compliance_figure(cases: Sequence[str], first_token: Sequence[float], leaks: Sequence[int], draws: int) -> go.Figure:
    """Per case two bars in percent: the probability that the token after the lead-in starts the
    phrase, and the share of the ``draws`` seeded answers that said it (labelled "k of n")."""
    labels = [wrap_label(case, 14) for case in cases]
    shares = [100 * k / draws for k in leaks]
    figure = go.Figure([
        go.Bar(name="next token after the lead-in starts it", x=labels, y=[100 * p for p in first_token],
               marker_color=FIRST_TOKEN, text=[f"{100 * p:.0f}%" for p in first_token], textposition="outside",
               cliponaxis=False, hovertemplate="%{x}: %{y:.1f}%<extra>first token</extra>"),
        go.Bar(name=f"answers that said it (of {draws})", x=labels, y=shares, marker_color=DRAWS,
               text=[f"{k} of {draws}" for k in leaks], textposition="outside", cliponaxis=False,
               hovertemplate="%{x}: %{y:.0f}%<extra>seeded answers</extra>"),
    ])
    figure.update_layout(template=TEMPLATE, barmode="group", height=420, legend=LEGEND_BELOW,
                         margin=dict(b=110), xaxis=dict(tickfont=dict(size=14)),
                         yaxis=dict(title=axis_title("Says the forbidden phrase", "%"), range=[0, 112]))
    return figure


def roads_figure(roads: Sequence[str], largest: Sequence[float], narrowest: float) -> go.Figure:
    """One bar per road: its largest logit difference from the alone road (log axis), with half the alone
    road's narrowest top-two gap as a dashed line: a bar must reach it before a greedy pick can change, since a
    pick flips only when the best logit falls and the second rises by a whole gap between them."""
    heights = [max(value, 1e-9) for value in largest]  # an exact road still shows, at the axis floor
    figure = go.Figure(go.Bar(
        x=[wrap_label(road, 12) for road in roads], y=heights,
        marker_color=OKABE_ITO[5], text=[f"{value:.1e}" if value else "0 (exact)" for value in largest],
        textposition="outside", cliponaxis=False, hovertemplate="%{x}: %{y:.2e}<extra></extra>"))
    shown = list(heights)
    if narrowest > 0:
        figure.add_hline(y=narrowest / 2, line_dash="dash", line_color="grey")
        shown.append(narrowest / 2)
    # Labels at powers of ten only, at most five, over whole decades (at least one, and half a decade above for the
    # bars' labels): left to itself Plotly also writes 2 and 5 between the powers, and on a phone they run into them.
    low, high = math.floor(math.log10(min(shown))), math.ceil(math.log10(max(shown)))
    high = max(high, low + 1)
    figure.update_layout(template=TEMPLATE, showlegend=False, height=380,
                         yaxis=dict(title=axis_title("Largest logit difference", "log scale"), type="log",
                                    exponentformat="power", tick0=low, dtick=math.ceil((high - low) / 4),
                                    range=[low, high + 0.5]))
    return figure
