"""The Sampling page's live chart as a Streamlit component: sliders and chart redrawn in the browser.

The component (ui/live_sampling.js, .css) is mounted in the page's own DOM (no iframe, nothing
fetched at run time) and receives charts.live_sampling's data. Each slider move redraws the chart in
the browser; when a slider rests, its settings come back to Python, which reruns the page's what-if
part so the numbers and charts below follow. A new tab's first run sends the chart's opening without the
logits (``picture_only``); they come in the run after.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ui.live_dom import figure_component

_COMPONENT = figure_component("live_sampling")


def live_sampling_chart(data: dict, key: str, on_settings: Callable[[], None]) -> dict | None:
    """Mount the live chart with ``data``; ``on_settings`` runs when the browser sends new settings,
    which are then in ``live_settings_sent(key)``. The browser takes the settings in ``data`` only from a run that
    has seen its last send (``seen_sent_at``)."""
    seen = (live_settings_sent(key) or {}).get("sent_at")
    return _COMPONENT(key=key, data={**data, "seen_sent_at": seen}, on_settings_change=on_settings,
                      height="content")


def live_settings_sent(key: str) -> dict | None:
    """The settings the browser last sent from the component mounted with ``key`` (None: none yet)."""
    state = st.session_state.get(key)
    return None if state is None else state.get("settings")
