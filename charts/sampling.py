"""Sampling page charts: the model's distribution beside the resampled one, the nucleus, the
survivors of each stage, and real draws against the expected probabilities."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import numpy as np
import plotly.graph_objects as go

from lifecycle.stages.vocabulary import show_token
from charts.theme import OKABE_ITO, TEMPLATE, axis_title
from lifecycle.stages.sampling import KEPT, STAGES, SampledDistribution, top_ids  # noqa: F401 - charts and views pick tokens with it

STAGE_LABELS = {
    "grammar": "grammar mask",
    "repetition_penalty": "repetition penalty",
    "temperature": "temperature",
    "top_k": "top-k",
    "top_p": "top-p",
    "min_p": "min-p",
}
BASE_COLOUR, FINAL_COLOUR = OKABE_ITO[0], OKABE_ITO[1]


def token_label(text: str) -> str:
    """A token as a chart label: whitespace made visible, and escaped, because Plotly renders
    a few HTML tags (<b>, <br>, <a>) in labels and tokens are model output."""
    return html.escape(show_token(text), quote=False)  # Plotly shows &quot; literally


def rank_labels(ids: Sequence[int], token_text: Callable[[int], str]) -> list[str]:
    # The rank prefix keeps labels unique: two tokens can decode to the same text.
    return [f"{rank}. {token_label(token_text(int(i)))}" for rank, i in enumerate(ids, start=1)]


def cumulative_mass(probs: np.ndarray, limit: int) -> np.ndarray:
    """Cumulative probability of the ``limit`` most likely tokens, most likely first."""
    return np.cumsum(probs[top_ids(probs, limit)])


def nucleus_figure(cumulative: Sequence[float], top_p: float, nucleus_size: int | None) -> go.Figure:
    """Cumulative probability by rank with the top-p threshold and the nucleus boundary.

    ``cumulative`` is over the distribution top-p acts on (after temperature and top-k);
    ``nucleus_size`` None leaves the boundary out (top-p off)."""
    ranks = list(range(1, len(cumulative) + 1))
    figure = go.Figure(
        go.Scatter(
            name="Cumulative probability", x=ranks, y=[float(c) for c in cumulative], mode="lines+markers",
            line=dict(color=BASE_COLOUR, width=3), marker=dict(size=5),
            hovertemplate="top %{x} tokens: %{y:.1%}<extra></extra>",
        )
    )
    figure.add_hline(y=top_p, line=dict(color=OKABE_ITO[5], dash="dash", width=2),
                     annotation_text=f"top_p = {top_p:g}", annotation_position="bottom right")
    if nucleus_size is not None:
        # A trace, not add_vline: shapes on a log axis would need log10 coordinates.
        figure.add_trace(
            go.Scatter(
                name="Nucleus boundary", x=[nucleus_size] * 3, y=[0, 0.12, 1.06], mode="lines+text",
                line=dict(color=OKABE_ITO[2], dash="dot", width=3), textposition="middle right",
                text=["", f" nucleus: {nucleus_size:,} token{'s' * (nucleus_size != 1)}", ""], hoverinfo="skip",
            )
        )
    figure.update_layout(
        template=TEMPLATE, showlegend=False, height=380,
        xaxis=dict(title=axis_title("Top tokens kept", "log scale"), type="log", dtick="D2"),  # short: fits a phone
        yaxis=dict(title=axis_title("Cumulative probability", "%"), tickformat=".0%", range=[0, 1.12]),
    )
    return figure


def survivors_after_stages(sampled: SampledDistribution) -> list[tuple[str, int]]:
    """How many tokens remain after each stage, starting with the whole vocabulary."""
    removed = sampled.removed_by
    remaining = [("vocabulary", int(removed.size))]
    for index, stage in enumerate(STAGES):
        gone = np.count_nonzero((removed != KEPT) & (removed <= index))
        remaining.append((STAGE_LABELS[stage], int(removed.size - gone)))
    return remaining


def survivors_figure(remaining: Sequence[tuple[str, int]]) -> go.Figure:
    """Tokens still in play after each stage, on a log axis (the vocabulary is ~49k, a nucleus a few).

    Horizontal bars, stages top to bottom, ticks every two decades: on a phone the stage names stay
    readable and the log ticks never touch (vertical bars turned the names sideways, and their height
    left the seven decade ticks piled on each other)."""
    names = [name for name, _ in remaining]
    counts = [count for _, count in remaining]
    top = max(max(counts), 1)
    figure = go.Figure(
        go.Bar(
            x=counts, y=names, orientation="h", marker_color=BASE_COLOUR, text=[f"{c:,}" for c in counts],
            textposition="outside", cliponaxis=False, hovertemplate="after %{y}: %{x:,} tokens<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE, showlegend=False, height=max(260, 34 * len(names) + 120),
        # Room right of the longest bar for its count: two decades past it on the log axis.
        xaxis=dict(title=axis_title("Tokens in play", "log"), type="log", dtick=2, tickformat=",",
                   range=[-0.2, np.log10(top) + 1.2]),
        yaxis=dict(type="category", autorange="reversed"),  # the stage names say what the rows are
    )
    return figure


def samples_figure(labels: Sequence[str], expected: Sequence[float], observed: Sequence[float], draws: int) -> go.Figure:
    """Share of ``draws`` real draws per token beside the probability it was drawn with."""
    figure = go.Figure(
        [
            go.Bar(name="Expected probability", x=list(labels), y=[float(e) for e in expected], marker_color=FINAL_COLOUR,
                   hovertemplate="%{x}: %{y:.2%}<extra>expected</extra>"),
            go.Bar(name=f"Share of {draws:,} draws", x=list(labels), y=[float(o) for o in observed], marker_color=OKABE_ITO[2],
                   hovertemplate="%{x}: %{y:.2%}<extra>drawn</extra>"),
        ]
    )
    figure.update_layout(
        template=TEMPLATE, barmode="group", height=400,
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        xaxis_title=axis_title("Token"),
        yaxis=dict(title=axis_title("Share", "%"), tickformat=".0%"),
    )
    return figure


def drawn_from_figure(sampled: SampledDistribution, token_text: Callable[[int], str], count: int = 10) -> go.Figure:
    """The tokens left in play after every stage, most likely first: what the next token is drawn
    from, with the model's own probability beside each (hover)."""
    survivors = int(np.count_nonzero(sampled.final_probs))
    ids = top_ids(sampled.final_probs, min(count, survivors))
    labels = rank_labels(ids, token_text)
    figure = go.Figure(
        go.Bar(
            x=sampled.final_probs[ids].tolist(), y=labels, orientation="h", marker_color=FINAL_COLOUR,
            # Inside a long bar, outside a short one: a 100% bar's label stays in a phone's narrow chart.
            text=[f"{p:.1%}" for p in sampled.final_probs[ids]], textposition="auto", cliponaxis=False,
            customdata=sampled.base_probs[ids].tolist(),
            hovertemplate="%{y}: %{x:.2%} (the model alone: %{customdata:.2%})<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE, showlegend=False, height=max(240, 34 * len(ids) + 120),
        xaxis=dict(title=axis_title("Probability after every stage", "%"), tickformat=".0%", range=[0, 1.15]),
        yaxis=dict(title=axis_title("Token still in play"), type="category", autorange="reversed"),
    )
    return figure
