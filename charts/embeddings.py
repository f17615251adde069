"""Embeddings page charts: token vectors as a heat strip, a 2-D PCA map, a cosine-similarity matrix."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import get_colorscale, unlabel_rgb

from lifecycle.stages.vocabulary import show_token
from charts.theme import DIVERGING, LEGEND_BELOW, OKABE_ITO, TEMPLATE, axis_title


def token_labels(texts: Sequence[str], start: int = 0) -> list[str]:
    """Unique, readable labels: position (counting from ``start``) and the text, whitespace made visible."""
    return [f"{i}: {show_token(text)}" for i, text in enumerate(texts, start=start)]



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
        # On two lines: in one, the title is wider than a phone-sized chart.
        xaxis_title=f"Embedding dimension<br>(first {shown.shape[1]} of {np.shape(vectors)[1]})",
        yaxis=dict(title=axis_title("Token", "position: text"), autorange="reversed", type="category"),
        height=max(320, 22 * len(labels) + 140),
    )
    return figure


STRIP_STEP = 16  # the strip's slider moves by this many dimensions
STRIP_START = 64


def strip_data(vectors: np.ndarray, labels: Sequence[str], hint: str) -> dict:
    """The strip for the browser (ui.live_strip): every dimension of each row once, as little-endian float16 in
    base64 (a third of the characters of JSON numbers; ~3 significant digits, what the colours and the hover's
    readout show), and the diverging colour scale as RGB stops."""
    values = np.ascontiguousarray(np.asarray(vectors, dtype="<f2"))
    if values.ndim != 2 or values.shape[0] != len(labels):
        raise ValueError(f"one label per row: {len(labels)} labels for vectors of shape {values.shape}")
    dims = int(values.shape[1])
    return {
        "labels": list(labels),
        "dims": dims,
        "values": base64.b64encode(values.tobytes()).decode("ascii"),
        "start": min(STRIP_START, dims),
        "step": min(STRIP_STEP, dims),
        "scale": [[round(float(at), 4), [int(c) for c in unlabel_rgb(rgb)]] for at, rgb in get_colorscale(DIVERGING)],
        "axis": "Embedding dimension",
        "bar_title": "value",
        "hint": hint,
        "label": f"The input vectors of {len(labels)} tokens, {dims} numbers each, as coloured cells",
    }


# Label placement assumes the smallest plot area the page gives the map (a phone, or half a projector).
PLOT_PX = (280.0, 400.0)
LABEL_FONT = 14
CHAR_PX, LINE_PX, MARKER_PX = 0.6 * LABEL_FONT, 1.3 * LABEL_FONT, 8.0
PLACES = {"top center": (0.0, 1.0), "bottom center": (0.0, -1.0), "middle right": (1.0, 0.0), "middle left": (-1.0, 0.0)}
RANGE_PAD = 0.08


def place_labels(coords: np.ndarray, labels: Sequence[str]) -> list[tuple[str, str]]:
    """(shown text, textposition) per point: each label beside its marker where it overlaps no label
    placed before it (earlier points first); a label with no free place is left to the hover."""
    coords = np.asarray(coords, dtype=np.float64)
    low, high = coords.min(axis=0), coords.max(axis=0)
    span = np.where(high > low, high - low, 1.0) * (1 + 2 * RANGE_PAD)
    pixels = (coords - low + RANGE_PAD * span / (1 + 2 * RANGE_PAD)) / span * PLOT_PX
    placed: list[tuple[float, float, float, float]] = []
    result = []
    for (x, y), label in zip(pixels, labels):
        width, height = CHAR_PX * len(label), LINE_PX
        for place, (dx, dy) in PLACES.items():
            cx = x + dx * (width / 2 + MARKER_PX)
            cy = y + dy * (height / 2 + MARKER_PX)
            box = (cx - width / 2, cy - height / 2, cx + width / 2, cy + height / 2)
            inside = box[0] >= 0 and box[2] <= PLOT_PX[0] and box[1] >= 0 and box[3] <= PLOT_PX[1]
            if inside and not any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
                placed.append(box)
                result.append((label, place))
                break
        else:
            result.append(("", "top center"))
    return result


def pca_map(coords: np.ndarray, labels: Sequence[str], groups: Sequence[str]) -> go.Figure:
    """Scatter of 2-D PCA coordinates, one trace (colour and marker) per group; labels placed so none overlap."""
    coords = np.asarray(coords, dtype=np.float64)
    placement = place_labels(coords, labels)
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
                text=[placement[i][0] for i in rows],
                textposition=[placement[i][1] for i in rows],
                textfont=dict(size=LABEL_FONT),
                customdata=[labels[i] for i in rows],
                marker=dict(size=13, color=OKABE_ITO[index % len(OKABE_ITO)], symbol=symbols[index % len(symbols)]),
                hovertemplate="%{customdata}<br>PC1 %{x:.3f}, PC2 %{y:.3f}<extra></extra>",
            )
        )
    low, high = coords.min(axis=0), coords.max(axis=0)
    pad = (high - low) * RANGE_PAD
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(title=axis_title("Component 1", "embedding units"), range=[low[0] - pad[0], high[0] + pad[0]]),
        yaxis=dict(title=axis_title("Component 2", "embedding units"), range=[low[1] - pad[1], high[1] + pad[1]]),
        height=560,
        legend=LEGEND_BELOW,
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
