"""The browser-drawn figures' shared code: each is a Streamlit component whose module is ui/live_dom.js's helpers
followed by the figure's own ui/<name>.js, with its ui/<name>.css, mounted in the page's own DOM."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

_HERE = Path(__file__).resolve().parent


def figure_component(name: str):
    """The component ``lifecycle_<name>`` drawn by ``ui/<name>.js`` and styled by ``ui/<name>.css``."""
    return st.components.v2.component(
        f"lifecycle_{name}",
        js=(_HERE / "live_dom.js").read_text() + "\n" + (_HERE / f"{name}.js").read_text(),
        css=(_HERE / f"{name}.css").read_text(),
        isolate_styles=False,  # in the page's DOM, so the page's font and the browser tests' DOM checks reach it
    )
