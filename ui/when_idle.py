"""A component with nothing to show that tells Python once, when the browser has drawn the page and is idle.

A page can then open with only what is on screen and build the rest in a second run, in the background:
the Forward pass page draws its first step tab at once and fills the other six (eight Plotly charts, most of
its browser-side drawing) only after that, so its tabs then switch in the browser with no run at all.

The component (JavaScript below, in the page's own DOM like ui/live_block.js) waits until every Plotly chart
on the page is drawn, then for the browser's next idle moment and ``AFTER_MS`` more, and sets its state
once. Placed in a fragment, that reruns only the fragment.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

AFTER_MS = 100  # after the page has drawn and the browser is idle: its first screen comes first
_JS = """
export default function ({ parentElement, data, setStateValue }) {
  parentElement.classList.add("when-idle");
  if (!data.ask || parentElement.dataset.asked) return;
  parentElement.dataset.asked = "1";
  const drawn = () => !document.querySelector('[data-testid="stSkeleton"]')
    && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'));
  const idle = window.requestIdleCallback || ((then) => setTimeout(then, 50));
  const tell = () => { parentElement.dataset.told = String(performance.now()); setStateValue("idle", true); };
  const wait = () => (drawn() ? idle(() => setTimeout(tell, data.after_ms), { timeout: 1000 }) : setTimeout(wait, 50));
  wait();
}
"""
# The element has no content: keep Streamlit's gap between elements out of the page too.
_CSS = '[data-testid="stElementContainer"]:has(.when-idle) {\n  display: none;\n}\n'
_COMPONENT = st.components.v2.component("lifecycle_when_idle", js=_JS, css=_CSS, isolate_styles=False)


def when_idle(key: str, on_idle: Callable[[], None] = lambda: None) -> bool:
    """Mount the component under ``key``; True once the browser has told (from that run on, for as long as
    the component is mounted in every run: leaving the page forgets it, so the next visit asks again)."""
    told = idle_told(key)
    _COMPONENT(key=key, data={"ask": not told, "after_ms": AFTER_MS}, on_idle_change=on_idle, height="content")
    return told


def idle_told(key: str) -> bool:
    state = st.session_state.get(key)
    return bool(state and state.get("idle"))
