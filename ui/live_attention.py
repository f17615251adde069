"""The Attention page's live maps as a Streamlit component: layer, head and query token redrawn in the browser.

The component (ui/live_attention.js, .css) is mounted in the page's own DOM (no iframe, nothing
fetched at run time) and receives charts.live_attention's data once per prompt (a new tab's first run sends
the start layer's maps alone, ``picture_only``, and the run after it every layer). Its controls only change what
is drawn, so nothing comes back to Python and no script runs when they move.
"""

from __future__ import annotations

from ui.live_dom import figure_component

_COMPONENT = figure_component("live_attention")


def live_attention_maps(data: dict, key: str) -> None:
    """Mount the live maps with ``data`` (charts.live_attention.live_attention_data)."""
    _COMPONENT(key=key, data=data, height="content")
