"""Forward pass page charts: the block as a flow with shapes, RoPE on one pair, scores and softmax,
the MLP's neurons, and the residual stream through the stack."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from charts.theme import FONT_SIZE, LEGEND_BELOW, MUTED, OKABE_ITO, TEMPLATE, axis_title

BOX_HEIGHT = 0.62  # of one row; the rest is the arrow between boxes
LABEL_SPOTS = ("top left", "bottom right", "top right", "bottom left")  # neighbouring labels do not overlap


def shape_text(shape: Sequence[int]) -> str:
    return "(" + " x ".join(f"{n:,}" for n in shape) + ")"


def block_flow_chart(names: Sequence[str], shapes: Sequence[Sequence[int]], norms: Sequence[float | None],
                     highlight: int | None = None) -> go.Figure:
    """The block top to bottom: one box per step, the shape it hands on written on the arrow below it,
    the residual stream's two skip connections drawn on the right. ``norms`` go inside the boxes."""
    rows = len(names)
    figure = go.Figure()
    adds = [i for i, name in enumerate(names) if name.startswith("+")]
    for i, (name, shape, norm) in enumerate(zip(names, shapes, norms)):
        colour = OKABE_ITO[1] if i == highlight else ("#FFF3D6" if i in adds else "#E8F1FA")
        figure.add_shape(type="rect", x0=0.05, x1=0.78, y0=-i - BOX_HEIGHT / 2, y1=-i + BOX_HEIGHT / 2,
                         line=dict(color="#444444", width=1), fillcolor=colour, layer="below")
        label = name + (f"  ·  ‖·‖ {norm:,.1f}" if norm is not None else "")
        figure.add_annotation(x=0.415, y=-i, text=label, showarrow=False, font=dict(size=FONT_SIZE - 3))
        if i + 1 < rows:
            figure.add_annotation(x=0.415, y=-i - 1 + BOX_HEIGHT / 2, ax=0.415, ay=-i - BOX_HEIGHT / 2,
                                  xref="x", yref="y", axref="x", ayref="y", showarrow=True, arrowhead=2,
                                  arrowwidth=1.5, text="")
            figure.add_annotation(x=0.43, y=-i - 0.5, text=shape_text(shape), showarrow=False, xanchor="left",
                                  font=dict(size=FONT_SIZE - 5, color="#555555"))
    starts = [0] + [a for a in adds[:-1]]
    for start, add in zip(starts, adds):
        figure.add_shape(type="path", path=f"M 0.78 {-start} L 0.92 {-start} L 0.92 {-add} L 0.78 {-add}",
                         line=dict(color=OKABE_ITO[2], width=2.5))
        figure.add_annotation(x=0.93, y=-(start + add) / 2, text="skip", showarrow=False, textangle=-90,
                              font=dict(size=FONT_SIZE - 5, color=OKABE_ITO[2]))
    figure.update_layout(
        template=TEMPLATE,
        xaxis=dict(visible=False, range=[0, 1]),
        yaxis=dict(visible=False, range=[-rows + 0.5, 0.5]),
        height=46 * rows + 40,
        margin=dict(l=5, r=5, t=10, b=10),
        showlegend=False,
    )
    return figure


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


def residual_stream_chart(residual_norms: np.ndarray, attention_norms: np.ndarray, mlp_norms: np.ndarray,
                          highlight: int | None = None) -> go.Figure:
    """The residual stream's length after the embedding and each layer (line), over what each layer's
    attention and MLP add to it (bars)."""
    layers = np.arange(len(attention_norms))
    figure = make_subplots(specs=[[{"secondary_y": True}]])
    figure.add_trace(go.Bar(x=layers, y=attention_norms, name="attention adds", marker_color=OKABE_ITO[0],
                            hovertemplate="layer %{x}: attention adds ‖·‖ = %{y:.1f}<extra></extra>"))
    figure.add_trace(go.Bar(x=layers, y=mlp_norms, name="MLP adds", marker_color=OKABE_ITO[5],
                            hovertemplate="layer %{x}: MLP adds ‖·‖ = %{y:.1f}<extra></extra>"))
    figure.add_trace(go.Scatter(x=np.arange(-1, len(layers)), y=residual_norms, name="residual stream",
                                mode="lines+markers", line=dict(color="#222222", width=3),
                                hovertemplate="after layer %{x}: ‖x‖ = %{y:.1f}<extra></extra>"), secondary_y=True)
    if highlight is not None:
        figure.add_vrect(x0=highlight - 0.5, x1=highlight + 0.5, fillcolor=OKABE_ITO[1], opacity=0.2, line_width=0)
    figure.update_layout(template=TEMPLATE, barmode="group", height=480, legend=LEGEND_BELOW)
    # Plotly's own tick spacing: every 2nd layer where there is room, fewer on a phone.
    figure.update_xaxes(title_text=axis_title("Layer", "-1 = embedding"), range=[-1.5, len(layers) - 0.5])
    figure.update_yaxes(title_text=axis_title("Length added", "L2 norm"), secondary_y=False, rangemode="tozero")
    figure.update_yaxes(title_text=axis_title("Stream length", "L2 norm"), secondary_y=True, showgrid=False,
                        rangemode="tozero")
    return figure
