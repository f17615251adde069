"""One look for every chart, readable on a projector: large type, colour-blind-safe colours.

Builders pass ``template=TEMPLATE`` and label every axis with ``axis_title(name, unit)``.
The palette is Okabe-Ito: its eight colours stay distinct for the common colour-vision deficiencies.
"""

from __future__ import annotations

# Plotly checks for pandas by reading sys.modules without importing it. While another session's thread is
# still importing pandas, that finds a half-built module and a chart fails ("partially initialized module
# 'pandas' has no attribute 'Series'", seen on a fresh server with pages opening at once). An import waits
# until the module is whole, so every chart module, through this one, meets pandas complete.
import pandas  # noqa: F401
import plotly.graph_objects as go

OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)
MUTED = "#B0B0B0"  # for what a stage removed or left out: grey reads as "not in play"
FONT_SIZE = 18
FONT_FAMILY = "Source Sans Pro, Arial, sans-serif"

TEMPLATE = go.layout.Template(
    layout=go.Layout(
        font=dict(family=FONT_FAMILY, size=FONT_SIZE, color="#222222"),
        title=dict(font=dict(size=FONT_SIZE + 4), x=0, xanchor="left"),
        colorway=list(OKABE_ITO),
        paper_bgcolor="white",
        plot_bgcolor="white",
        margin=dict(l=70, r=30, t=60, b=70),
        hoverlabel=dict(font=dict(size=FONT_SIZE - 2)),
        legend=dict(font=dict(size=FONT_SIZE - 2)),
        xaxis=dict(showgrid=True, gridcolor="#E5E5E5", linecolor="#444444", ticks="outside",
                   title=dict(font=dict(size=FONT_SIZE)), automargin=True),
        yaxis=dict(showgrid=True, gridcolor="#E5E5E5", linecolor="#444444", ticks="outside",
                   title=dict(font=dict(size=FONT_SIZE)), automargin=True),
        coloraxis=dict(colorscale="Cividis"),
    ),
    data=dict(
        heatmap=[go.Heatmap(colorscale="Cividis")],
        bar=[go.Bar(marker=dict(line=dict(width=0)))],
    ),
)
# Sequential scale for heatmaps (attention, embeddings): perceptually uniform and colour-blind safe.
SEQUENTIAL = "Cividis"
# Diverging scale for signed values (embedding components, cosine similarity): blue for the lowest
# values, red for the highest (Plotly's "RdBu" runs the other way round, hence "_r").
DIVERGING = "RdBu_r"
DIVERGING_MEANING = "Blue is negative, red positive, white zero."


# A horizontal legend at the very bottom of the figure (container coordinates): Plotly grows the
# bottom margin to fit however many rows it wraps into, so it never lands on an axis title or the title.
LEGEND_BELOW = dict(orientation="h", yref="container", yanchor="bottom", y=0.0, x=0)


def axis_title(name: str, unit: str | None = None) -> str:
    """An axis label with its unit in parentheses, e.g. ``axis_title("Time", "ms")`` -> "Time (ms)"."""
    return f"{name} ({unit})" if unit else name


def wrap_label(text: str, width: int = 16) -> str:
    """A category label broken into lines of about ``width`` characters at spaces (Plotly's ``<br>``),
    so a long tick label does not take a phone-sized chart's whole width. Single words stay whole."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)
