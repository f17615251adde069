"""The Embeddings page's strip as a Streamlit component: token vectors drawn and resized in the browser.

The component (ui/live_strip.js, .css) is mounted in the page's own DOM (no iframe, nothing fetched at
run time) and receives charts.embeddings.strip_data: every dimension of every shown token once. Its
"Dimensions shown" slider and its hover readout work in the browser; nothing comes back to Python, and
the page holds no Plotly chart until its picture is drawn.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

_HERE = Path(__file__).resolve().parent
_COMPONENT = st.components.v2.component(
    "lifecycle_live_strip",
    js=(_HERE / "live_strip.js").read_text(),
    css=(_HERE / "live_strip.css").read_text(),
    isolate_styles=False,  # in the page's DOM, so the page's font and the browser tests' DOM checks reach it
)


def live_strip(data: dict, key: str) -> None:
    """Mount the strip of ``data`` (charts.embeddings.strip_data) under ``key``."""
    _COMPONENT(key=key, data=data, height="content")
