"""Context window charts: the token budget as stacked horizontal bars against the window (drawn in the browser on
the page; in Plotly for Live calls and the handout).

Each row is one prompt (e.g. "this run", "with tools and documents", "after truncation"); its
bar is the prompt's segments, then the output reserve, then the free space; a dashed line marks
the window, so an overflowing row visibly runs past it.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from charts.bars import BarChart, BarRow, BarView, Segment, Series, bars_data
from charts.theme import LEGEND_BELOW, MUTED, OKABE_ITO, TEMPLATE, axis_title, wrap_label
from lifecycle.stages.context_window import DEFAULT_SYSTEM, DOCUMENTS, HISTORY, NEW_MESSAGE, SYSTEM, TEMPLATE as TEMPLATE_SEGMENT
from lifecycle.stages.context_window import TOOLS, ContextBudget

OUTPUT_RESERVE = "output reserve"
FREE = "free"
# Drawing order (left to right) and one colour per part; "template" is labelled as overhead.
BUDGET_PARTS = (SYSTEM, DEFAULT_SYSTEM, TOOLS, DOCUMENTS, HISTORY, NEW_MESSAGE, TEMPLATE_SEGMENT, OUTPUT_RESERVE, FREE)
PART_LABELS = {TEMPLATE_SEGMENT: "template overhead"}
PART_COLOURS = {
    SYSTEM: OKABE_ITO[0],
    DEFAULT_SYSTEM: OKABE_ITO[4],
    TOOLS: OKABE_ITO[1],
    DOCUMENTS: OKABE_ITO[2],
    HISTORY: OKABE_ITO[3],
    NEW_MESSAGE: OKABE_ITO[5],
    TEMPLATE_SEGMENT: OKABE_ITO[7],
    OUTPUT_RESERVE: OKABE_ITO[6],
    FREE: MUTED,
}


def budget_parts(budget: ContextBudget) -> dict[str, int]:
    """Tokens per part of the window, in drawing order (parts with no tokens left out)."""
    tokens = {segment.name: segment.tokens for segment in budget.segments}
    tokens[OUTPUT_RESERVE] = budget.output_reserve
    tokens[FREE] = budget.free
    return {part: tokens[part] for part in BUDGET_PARTS if tokens.get(part)}


def budget_chart(rows: Sequence[tuple[str, ContextBudget]]) -> go.Figure:
    """Stacked bars, one row per (label, budget), all against the first budget's window."""
    labels = [wrap_label(label, 14) for label, _ in rows]  # long row names on two lines: room for the bars on a phone
    parts = [budget_parts(budget) for _, budget in rows]
    figure = go.Figure()
    for part in BUDGET_PARTS:
        values = [p.get(part, 0) for p in parts]
        if not any(values):
            continue
        name = PART_LABELS.get(part, part)
        figure.add_trace(
            go.Bar(
                name=name,
                y=labels,
                x=values,
                orientation="h",
                marker=dict(color=PART_COLOURS[part], line=dict(color="white", width=1)),
                text=[f"{v:,}" if v else "" for v in values],
                textposition="inside",
                insidetextanchor="middle",
                hovertemplate=f"{name}: %{{x:,}} tokens<extra>%{{y}}</extra>",
            )
        )
    window = rows[0][1].window
    longest = max(sum(p.values()) for p in parts)
    figure.add_vline(
        x=window,
        line=dict(color="#D55E00", width=3, dash="dash"),
        annotation=dict(text=f"window {window:,}", font=dict(color="#D55E00")),
        annotation_position="top left",
    )
    figure.update_layout(
        template=TEMPLATE,
        barmode="stack",
        xaxis=dict(title=axis_title("Context window", "tokens"), range=[0, max(window, longest) * 1.04]),
        yaxis=dict(autorange="reversed", title=None),
        legend=dict(LEGEND_BELOW, traceorder="normal"),
        uniformtext=dict(minsize=13, mode="hide"),
        height=110 * len(rows) + 250,
        margin=dict(t=70),
    )
    return figure


def budget_bars(rows: Sequence[tuple[str, ContextBudget]]) -> dict:
    """Stacked bars (ui.live_bars), one row per (label, budget), against the first budget's window: a dashed line
    marks it, so an overflowing row runs past it."""
    parts_of = [budget_parts(budget) for _, budget in rows]
    present = [part for part in BUDGET_PARTS if any(part in parts for parts in parts_of)]
    series = [Series(PART_LABELS.get(part, part), PART_COLOURS[part]) for part in present]
    bar_rows = []
    for (label, budget), parts in zip(rows, parts_of):
        segments = [Segment(parts[part], f"{parts[part]:,}", present.index(part),
                            f"{PART_LABELS.get(part, part)}: {parts[part]:,} tokens")
                    for part in present if part in parts]
        bar_rows.append(BarRow(label, segments, title=f"{label}: {budget.prompt_tokens + budget.output_reserve:,} of {budget.window:,} tokens"))
    window = rows[0][1].window
    view = BarView("tokens", "Context window (tokens)", bar_rows, line=(window, f"window {window:,}"))
    return bars_data(BarChart(views=[view], series=series, mode="stack", legend=True,
                              label=f"The prompt's tokens, the output reserve and the free space in a {window:,}-token window"))
