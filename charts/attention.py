"""Attention page charts: one head's weights, every layer x head at a glance, one query's row, the logit lens."""

from __future__ import annotations

import math

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from lifecycle.stages.vocabulary import show_token
from charts.theme import MUTED, OKABE_ITO, SEQUENTIAL, TEMPLATE, axis_title

# Colour follows the square root of the weight (the colour bar still reads true weights): most weights
# are small next to the first token's, and on a linear scale they all look alike.
_STOPS = np.linspace(0.0, 1.0, 21)
SQRT_SCALE = [[float(v), c] for v, c in zip(_STOPS**2, sample_colorscale(SEQUENTIAL, list(_STOPS)))]
# The colour bar's axis is linear in the weight: a tick at 0.05 would sit on top of the one at 0.
WEIGHT_TICKS = dict(tickvals=[0, 0.2, 0.5, 1.0], ticktext=["0", "0.2", "0.5", "1"])
# The colour bar lies along the top of a heat map: standing at its side, it took a third of a phone's width.
TOP_COLORBAR = dict(title=dict(text="weight", side="top"), orientation="h", x=0.5, xanchor="center", y=1.0,
                    yanchor="bottom", len=1.0, thickness=14, **WEIGHT_TICKS)

# Each tile of the all-heads mosaic is at most this many cells on a side (block-averaged).
MOSAIC_TILE = 24
MAX_TOKEN_TICKS = 30
MAX_KEY_TICKS = 10  # upright key labels side by side: as many as fit a phone-wide heat map
MAX_LAYER_TICKS = 10  # layer numbers under the all-heads mosaic: as many as fit a projector
TICK_FONT = 14
LENS_FONT = 14
LENS_ROW_PX = 22  # per layer of the logit lens: room for one line of 14 px text


def attention_heatmap(
    weights: np.ndarray, labels: Sequence[str], title: str, highlight_row: int | None = None
) -> go.Figure:
    """Query rows x key columns of attention weights (0..1); ``highlight_row`` gets a box around it."""
    weights = np.asarray(weights, dtype=np.float64)
    figure = go.Figure(
        go.Heatmap(
            z=weights,
            x=list(labels),
            y=list(labels),
            colorscale=SQRT_SCALE,
            zmin=0.0,
            zmax=1.0,
            colorbar=TOP_COLORBAR,
            hovertemplate="query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
        )
    )
    if highlight_row is not None:
        figure.add_shape(
            type="rect", xref="paper", x0=0, x1=1, yref="y", y0=highlight_row - 0.5, y1=highlight_row + 0.5,
            line=dict(color=OKABE_ITO[1], width=3),
        )
    side = max(420, min(900, 16 * len(labels) + 220))
    step = max(1, math.ceil(len(labels) / MAX_TOKEN_TICKS))
    key_step = max(1, math.ceil(len(labels) / MAX_KEY_TICKS))  # the hover names every key
    figure.update_layout(
        template=TEMPLATE,
        title=title,
        # Upright labels, at most MAX_TOKEN_TICKS per axis: long prompts label every n-th token.
        xaxis=dict(title=axis_title("Key: the token looked at"), type="category", tickangle=-90,
                   tickfont=dict(size=TICK_FONT), dtick=key_step),
        yaxis=dict(title=axis_title("Query: the token looking"), type="category", autorange="reversed",
                   tickfont=dict(size=TICK_FONT), dtick=step),
        height=side + 60,
        margin=dict(t=120),  # the title, then the colour bar
    )
    return figure


def block_mean(matrix: np.ndarray, size: int) -> np.ndarray:
    """Average ``matrix`` over a grid of at most ``size`` x ``size`` near-equal blocks."""
    matrix = np.asarray(matrix, dtype=np.float64)
    rows = np.linspace(0, matrix.shape[0], min(size, matrix.shape[0]) + 1).astype(int)
    cols = np.linspace(0, matrix.shape[1], min(size, matrix.shape[1]) + 1).astype(int)
    sums = np.add.reduceat(np.add.reduceat(matrix, rows[:-1], axis=0), cols[:-1], axis=1)
    return sums / np.outer(np.diff(rows), np.diff(cols))


def attention_mosaic(attentions: Mapping[int, np.ndarray], tile: int = MOSAIC_TILE) -> go.Figure:
    """Every layer (columns) x head (rows) as one heatmap: tiles separated by blank gaps.

    One trace instead of 270 subplots keeps the page fast; each tile is block-averaged to at
    most ``tile`` cells a side.
    """
    layers = sorted(attentions)
    heads = next(iter(attentions.values())).shape[0]
    side = min(tile, next(iter(attentions.values())).shape[-1])
    step = side + 1
    layer_step = max(1, math.ceil(len(layers) / MAX_LAYER_TICKS))
    mosaic = np.full((heads * step - 1, len(layers) * step - 1), np.nan)
    for column, layer in enumerate(layers):
        for head in range(heads):
            mosaic[head * step : head * step + side, column * step : column * step + side] = block_mean(
                attentions[layer][head], side
            )
    figure = go.Figure(
        go.Heatmap(
            z=mosaic,
            colorscale=SQRT_SCALE,
            zmin=0.0,
            zmax=1.0,
            colorbar=TOP_COLORBAR,
            hoverongaps=False,
            hovertemplate="weight %{z:.3f}<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(
            title=axis_title("Layer"), showgrid=False, zeroline=False,
            tickvals=[c * step + side / 2 - 0.5 for c in range(0, len(layers), layer_step)],
            ticktext=[str(layer) for layer in layers[::layer_step]],
        ),
        yaxis=dict(
            title=axis_title("Query head"), tickvals=[h * step + side / 2 - 0.5 for h in range(heads)],
            ticktext=[str(h) for h in range(heads)], autorange="reversed", showgrid=False, zeroline=False,
        ),
        height=max(360, 50 * heads + 140) + 60,
        margin=dict(t=90),  # the colour bar
    )
    return figure


def attention_bars(row: np.ndarray, labels: Sequence[str], query: int) -> go.Figure:
    """How much the token at ``query`` attends to each earlier token (keys after it are masked out)."""
    weights = np.asarray(row, dtype=np.float64)[: query + 1]
    keys = list(labels)[: query + 1]
    top = int(np.argmax(weights))
    figure = go.Figure(
        go.Bar(
            x=weights,
            y=keys,
            orientation="h",
            marker_color=[OKABE_ITO[1] if i == top else OKABE_ITO[0] for i in range(len(keys))],
            text=[f"{w:.1%}" for w in weights],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}: %{x:.3f}<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(title=axis_title("Attention weight", "%"), range=[0, 1.1],
                   tickformat=".0%"),
        yaxis=dict(title=axis_title("Key token"), type="category", autorange="reversed"),
        height=max(300, 24 * len(keys) + 140),
        showlegend=False,
    )
    return figure


def logit_lens_chart(layers: Sequence[int], tokens: Sequence[str], probabilities: Sequence[float],
                     final_token: str) -> go.Figure:
    """Each layer's top-1 next-token guess and its probability; guesses equal to the final answer stand out."""
    colours = [OKABE_ITO[2] if token == final_token else MUTED for token in tokens]
    # One row per layer, the guess written level beside its bar: labels one under the other never
    # collide, however narrow the chart (upright labels over 30 columns did on a projector).
    figure = go.Figure(
        go.Bar(
            y=list(layers),
            x=list(probabilities),
            orientation="h",
            text=[show_token(t) for t in tokens],
            textposition="outside",
            constraintext="none",  # full-size text, never shrunk to the bar's thickness
            textfont=dict(size=LENS_FONT),
            cliponaxis=False,
            marker_color=colours,
            hovertemplate="layer %{y}: %{text} at %{x:.1%}<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        yaxis=dict(title=axis_title("Layer", "0 = first"), dtick=1, tickfont=dict(size=LENS_FONT),
                   autorange="reversed"),
        xaxis=dict(title=axis_title("Top-1 probability"), range=[0, 1.45], tickformat=".0%",
                   tickvals=[0, 0.5, 1.0]),
        height=LENS_ROW_PX * len(layers) + 150,
        bargap=0.25,
        showlegend=False,
    )
    return figure
