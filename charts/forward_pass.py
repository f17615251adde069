"""Forward pass page charts: RoPE on one pair, scores and softmax, the MLP's neurons (the block's steps and
the residual stream through the stack are drawn live in the browser: charts/live_block.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from charts.theme import LEGEND_BELOW, MUTED, OKABE_ITO, TEMPLATE, axis_title

LABEL_SPOTS = ("top left", "bottom right", "top right", "bottom left")  # neighbouring labels do not overlap


def shape_text(shape: Sequence[int]) -> str:
    return "(" + " x ".join(f"{n:,}" for n in shape) + ")"


def vector_rows(vectors: Sequence[np.ndarray], labels: Sequence[str], dims: int) -> go.Figure:
    """Heat strip of the first ``dims`` numbers of each vector (one row per step), centred at 0."""
    shown = np.stack([np.asarray(v, dtype=np.float64)[:dims] for v in vectors])
    limit = float(np.percentile(np.abs(shown), 99)) or 1.0
    figure = go.Figure(go.Heatmap(
        z=shown, x=list(range(shown.shape[1])), y=list(labels), colorscale="RdBu", reversescale=True, zmid=0.0,
        zmin=-limit, zmax=limit, colorbar=dict(title=dict(text="value", side="right")),
        hovertemplate="%{y}<br>dimension %{x}: %{z:.3f}<extra></extra>",
    ))
    figure.update_layout(
        template=TEMPLATE,
        xaxis_title=axis_title("Dimension", f"first {shown.shape[1]}"),
        yaxis=dict(type="category", autorange="reversed"),
        height=60 * len(labels) + 140,
    )
    return figure


def rope_rotation(before: np.ndarray, after: np.ndarray, angle: float, dims: tuple[int, int]) -> go.Figure:
    """One query head's dimension pair as a 2-D arrow before and after RoPE turns it by ``angle``."""
    radius = float(np.linalg.norm(before)) or 1.0
    turn = float(np.mod(angle, 2 * np.pi))  # whole turns leave the arrow where it was
    arc = np.linspace(np.arctan2(before[1], before[0]), np.arctan2(before[1], before[0]) + turn, 60)
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=0.35 * radius * np.cos(arc), y=0.35 * radius * np.sin(arc), mode="lines",
                                line=dict(color=MUTED, dash="dot"), name=f"turned {np.degrees(turn):.1f}° (mod 360°)",
                                hoverinfo="skip"))
    for vector, name, colour in ((before, "before RoPE", OKABE_ITO[0]), (after, "after RoPE", OKABE_ITO[1])):
        figure.add_trace(go.Scatter(x=[0, vector[0]], y=[0, vector[1]], mode="lines+markers", name=name,
                                    line=dict(color=colour, width=4), marker=dict(size=[0, 12], color=colour),
                                    hovertemplate=f"{name}: (%{{x:.3f}}, %{{y:.3f}})<extra></extra>"))
    limit = radius * 1.15
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(title=axis_title(f"Dimension {dims[0]}"), range=[-limit, limit], zeroline=True),
        yaxis=dict(title=axis_title(f"Dimension {dims[1]}"), range=[-limit, limit], zeroline=True,
                   scaleanchor="x", scaleratio=1),
        height=480,
        legend=LEGEND_BELOW,  # under the axis title, never on it
    )
    return figure


def scores_and_weights(scores: np.ndarray, weights: np.ndarray, labels: Sequence[str]) -> go.Figure:
    """One head's scaled scores for every key (masked keys marked) above the softmax weights they become."""
    scores = np.asarray(scores, dtype=np.float64)
    visible = np.isfinite(scores)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                           subplot_titles=("Score Q·K/√d (masked keys: later tokens)", "Softmax weight"))
    figure.add_trace(go.Bar(x=list(labels), y=np.where(visible, scores, 0.0), marker_color=np.where(
        visible, OKABE_ITO[0], MUTED).tolist(), name="score",
        customdata=np.where(visible, "", "masked: -inf").tolist(),
        hovertemplate="%{x}: %{y:.2f} %{customdata}<extra></extra>"), row=1, col=1)
    masked = [label for label, shown in zip(labels, visible) if not shown]
    if masked:
        figure.add_trace(go.Scatter(x=masked, y=[0] * len(masked), mode="markers", name="masked (-inf)",
                                    marker=dict(symbol="x", size=10, color=OKABE_ITO[5])), row=1, col=1)
    figure.add_trace(go.Bar(x=list(labels), y=np.asarray(weights, dtype=np.float64), marker_color=OKABE_ITO[1],
                            name="weight", hovertemplate="%{x}: %{y:.1%}<extra></extra>"), row=2, col=1)
    figure.update_layout(template=TEMPLATE, height=560, showlegend=bool(masked),
                         legend=dict(orientation="h", y=1.12, x=1, xanchor="right"))
    figure.update_xaxes(type="category", tickangle=-60, row=2, col=1)
    figure.update_yaxes(title_text=axis_title("Score"), row=1, col=1)
    figure.update_yaxes(title_text=axis_title("Weight"), tickformat=".0%", row=2, col=1)
    return figure


def silu_neurons(gate: np.ndarray, activated: np.ndarray, top: Sequence[int]) -> go.Figure:
    """Every MLP neuron's gate value against SiLU(gate) on the SiLU curve; the strongest ones marked."""
    gate = np.asarray(gate, dtype=np.float64)
    grid = np.linspace(min(gate.min(), -4.0), max(gate.max(), 4.0), 200)
    figure = go.Figure()
    figure.add_trace(go.Scatter(x=grid, y=grid / (1 + np.exp(-grid)), mode="lines", name="SiLU(g) = g·σ(g)",
                                line=dict(color=MUTED, width=2), hoverinfo="skip"))
    figure.add_trace(go.Scattergl(x=gate, y=activated, mode="markers", name=f"all {gate.size:,} neurons",
                                  marker=dict(size=5, color=OKABE_ITO[0], opacity=0.45),
                                  hovertemplate="gate %{x:.2f} -> %{y:.2f}<extra></extra>"))
    top = list(top)
    figure.add_trace(go.Scatter(x=gate[top], y=np.asarray(activated)[top], mode="markers+text", name="firing most",
                                text=[f"#{i}" for i in top],
                                textposition=[LABEL_SPOTS[i % len(LABEL_SPOTS)] for i in range(len(top))],
                                marker=dict(size=11, color=OKABE_ITO[5]),
                                hovertemplate="neuron %{text}: gate %{x:.2f} -> %{y:.2f}<extra></extra>"))
    figure.update_layout(template=TEMPLATE, height=440,
                         xaxis_title=axis_title("Gate value g"), yaxis_title=axis_title("SiLU(g)"),
                         legend=LEGEND_BELOW)
    return figure


def top_neuron_bars(neurons: Sequence[int], activated: np.ndarray, up: np.ndarray, product: np.ndarray) -> go.Figure:
    """For the neurons firing most: SiLU(gate), up and their product, side by side."""
    labels = [str(i) for i in neurons]
    figure = go.Figure()
    for values, name, colour in ((activated, "SiLU(gate)", OKABE_ITO[0]), (up, "up", OKABE_ITO[4]),
                                 (product, "product", OKABE_ITO[5])):
        figure.add_trace(go.Bar(x=labels, y=np.asarray(values, dtype=np.float64)[list(neurons)], name=name,
                                marker_color=colour, hovertemplate=f"neuron %{{x}}: {name} %{{y:.3f}}<extra></extra>"))
    figure.update_layout(template=TEMPLATE, barmode="group", height=420,
                         # Plotly turns the neuron numbers upright where they would collide (a phone).
                         xaxis=dict(title=axis_title("Neuron", "index"), type="category"),
                         yaxis_title=axis_title("Value"), legend=LEGEND_BELOW)
    return figure
