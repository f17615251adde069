"""Bars drawn in the browser as a Streamlit component, as rows or as columns: a page's picture without plotly.js.

A page that leads with a Plotly chart waits, in a new tab, for Streamlit to fetch and run plotly.js
(a 4.7 MB chunk) before anything is drawn: 2.1–2.5 s here. This component (ui/live_bars.js, .css) is
mounted in the page's own DOM (no iframe, nothing fetched at run time) and draws the bars that
charts/*.py describe as plain data: rows of segments, stacked or side by side, against a value axis
(linear or logarithmic), drawn as horizontal bars or as upright columns, with an optional dashed line (a window,
a vocabulary) and a legend. A chart with several views (e.g. probability and log-probability) switches between
them in the browser; nothing comes back to Python.
"""

from __future__ import annotations

from ui.live_dom import figure_component

_COMPONENT = figure_component("live_bars")


def live_bars(data: dict, key: str) -> None:
    """Mount the bars of ``data`` (built by charts.bars.bars_data) under ``key``."""
    _COMPONENT(key=key, data=data, height="content")
