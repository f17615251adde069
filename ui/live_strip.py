"""The Embeddings page's strip as a Streamlit component: token vectors drawn and resized in the browser.

The component (ui/live_strip.js, .css) is mounted in the page's own DOM (no iframe, nothing fetched at
run time) and receives charts.embeddings.strip_data: every dimension of every shown token once. Its
"Dimensions shown" slider and its hover readout work in the browser; nothing comes back to Python, and
the page holds no Plotly chart until its picture is drawn.
"""

from __future__ import annotations

from ui.live_dom import figure_component

_COMPONENT = figure_component("live_strip")


def live_strip(data: dict, key: str) -> None:
    """Mount the strip of ``data`` (charts.embeddings.strip_data) under ``key``."""
    _COMPONENT(key=key, data=data, height="content")
