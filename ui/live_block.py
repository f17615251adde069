"""The Forward pass page's live block as a Streamlit component: layer and query head redrawn in the browser.

The component (ui/live_block.js, .css) is mounted in the page's own DOM (no iframe, nothing fetched
at run time) and receives charts.live_block's data once per prompt and token. Moving a control
redraws it in the browser; when the controls rest, the (layer, head) comes back to Python, which
reruns the page so the step-by-step details follow.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ui.live_dom import figure_component

_COMPONENT = figure_component("live_block")


def live_block(data: dict, key: str, on_view: Callable[[], None]) -> None:
    """Mount the live block with ``data``; ``on_view`` runs when the browser sends a (layer, head),
    which is then in ``block_view(key)``."""
    _COMPONENT(key=key, data=data, on_view_change=on_view, height="content")


def block_view(key: str) -> dict | None:
    """The view the browser last sent from the component mounted with ``key`` (None: none yet)."""
    state = st.session_state.get(key)
    return None if state is None else state.get("view")
