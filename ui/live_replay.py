"""The browser-drawn replays as a Streamlit component: step buttons, a slider and a play button redrawn in the browser.

The component (ui/live_replay.js, .css) is mounted in the page's own DOM (no iframe, nothing
fetched at run time) and receives one of charts.live_replay's data sets: a generation's steps, the
KV cache's growth or a recorded stream. Every control only changes what is drawn, so nothing comes
back to Python and no control starts a script run.
"""

from __future__ import annotations

from ui.live_dom import figure_component

_COMPONENT = figure_component("live_replay")


def live_replay(data: dict, key: str) -> None:
    """Mount the replay of ``data`` (charts.live_replay) under ``key``."""
    _COMPONENT(key=key, data=data, height="content")
