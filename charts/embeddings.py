"""Embeddings page charts: token vectors as a heat strip, a 2-D PCA map, a cosine-similarity matrix."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from charts.theme import DIVERGING, OKABE_ITO, TEMPLATE, axis_title


def token_labels(texts: Sequence[str], start: int = 0) -> list[str]:
    """Unique, readable labels: position (counting from ``start``) and the text, whitespace made visible."""
    return [f"{i}: {text!r}" for i, text in enumerate(texts, start=start)]


def quoted(text: str) -> str:
    """A token's repr for a Markdown sentence: punctuation escaped, so it always shows literally."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>$~])", r"\\\1", repr(text))


def embedding_strip(vectors: np.ndarray, labels: Sequence[str], dims: int) -> go.Figure:
    """Heat strip of the first ``dims`` components of each token's vector (rows: tokens, top first).

    The diverging scale is centred at 0 and symmetric, so sign and size read the same everywhere.
    """
    shown = np.asarray(vectors, dtype=np.float64)[:, :dims]
    limit = float(np.abs(shown).max()) or 1.0
    figure = go.Figure(
        go.Heatmap(
            z=shown,
            x=list(range(shown.shape[1])),
            y=list(labels),
            colorscale=DIVERGING,
            zmid=0.0,
            zmin=-limit,
            zmax=limit,
            colorbar=dict(title=dict(text="value", side="right")),
            hovertemplate="%{y}<br>dimension %{x}: %{z:.4f}<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis_title=axis_title("Embedding dimension", f"first {shown.shape[1]} of {np.shape(vectors)[1]}"),
        yaxis=dict(title=axis_title("Token", "position: text"), autorange="reversed", type="category"),
        height=max(320, 22 * len(labels) + 140),
    )
    return figure


def pca_map(coords: np.ndarray, labels: Sequence[str], groups: Sequence[str]) -> go.Figure:
    """Scatter of 2-D PCA coordinates, one trace (colour and marker) per group, each point labelled."""
    coords = np.asarray(coords, dtype=np.float64)
    figure = go.Figure()
    symbols = ("circle", "diamond", "square", "triangle-up")
    for index, group in enumerate(dict.fromkeys(groups)):
        rows = [i for i, g in enumerate(groups) if g == group]
        figure.add_trace(
            go.Scatter(
                x=coords[rows, 0],
                y=coords[rows, 1],
                mode="markers+text",
                name=group,
                text=[labels[i] for i in rows],
                textposition="top center",
                marker=dict(size=13, color=OKABE_ITO[index % len(OKABE_ITO)], symbol=symbols[index % len(symbols)]),
                hovertemplate="%{text}<br>PC1 %{x:.3f}, PC2 %{y:.3f}<extra></extra>",
            )
        )
    figure.update_layout(
        template=TEMPLATE,
        xaxis_title=axis_title("Principal component 1", "embedding units"),
        yaxis_title=axis_title("Principal component 2", "embedding units"),
        height=560,
        legend=dict(orientation="h", y=-0.2),
    )
    return figure


def similarity_matrix(similarity: np.ndarray, labels: Sequence[str]) -> go.Figure:
    """Cosine similarities in [-1, 1] on a diverging scale centred at 0, each cell printed."""
    similarity = np.asarray(similarity, dtype=np.float64)
    figure = go.Figure(
        go.Heatmap(
            z=similarity,
            x=list(labels),
            y=list(labels),
            colorscale=DIVERGING,
            zmin=-1.0,
            zmax=1.0,
            zmid=0.0,
            text=[[f"{v:.2f}" for v in row] for row in similarity],
            texttemplate="%{text}",
            colorbar=dict(title=dict(text="cosine", side="right")),
            hovertemplate="%{y} vs %{x}: %{z:.3f}<extra></extra>",
        )
    )
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(title=axis_title("Word"), type="category"),
        yaxis=dict(title=axis_title("Word"), autorange="reversed", type="category"),
        height=max(360, 60 * len(labels) + 160),
    )
    return figure
