"""A component with nothing to show that tells Python once, when the browser has drawn the page and is idle.

A page can then open with only its picture and build the rest in a second run, in the background. The pages
led by one of the app's own SVG components (the live block, the replays, the live sampling chart) hold no Plotly
chart in their first run: in a new tab every chart waits for plotly.js (a 4.7 MB chunk whose first run takes ~1 s
of the browser's CPU), and the picture drawn in the same run waited with it (the Streaming page's replay was drawn
at 2.8 s, 1.1 s without). ``details_ready`` gives a page that; the Forward pass page's step tabs (nine charts)
use ``when_idle`` in their fragment, and then switch in the browser with no run at all.

The component (JavaScript below, in the page's own DOM like ui/live_block.js) waits until every Plotly chart
on the page is drawn, then for the browser's next idle moment and ``AFTER_MS`` more, and sets its state
once. Placed in a fragment, that reruns only the fragment. Once it has told and been drawn again, its element
carries ``data-settled`` (what the browser tests and the bench wait for).

A tell can be lost: in a new tab of a page whose details are in a fragment, the frame's component and the fragment's
tell at once, and one was seen left told and never answered, the server idle (a browser test's failure said so). A
component still unanswered ``STUCK_MS`` after telling, with no run on its way, tells again with a new value, up to
``RETELLS`` times (tests/browser/test_when_idle.py drops a tell on the websocket and sees the details come).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState  # Streamlit 1.67: is a fragment running

AFTER_MS = 100  # after the page has drawn and the browser is idle: its first screen comes first
# A component that told and is still unanswered after STUCK_MS without a run on its way tells again, RETELLS times at
# most (looked at every CHECK_MS).
CHECK_MS = 1000
STUCK_MS = 5000
RETELLS = 3
_RETELL = {"check_ms": CHECK_MS, "stuck_ms": STUCK_MS, "retells": RETELLS}
DETAILS_PENDING = "Drawing the details below the picture…"
_PAGE_ASKS = "when_idle_page_asks"
_JS = """
export default function ({ parentElement, data, setStateValue }) {
  parentElement.classList.add("when-idle");
  if (!data.ask) parentElement.dataset.settled = "1";
  if (!data.ask || parentElement.dataset.asked) return;
  parentElement.dataset.asked = "1";
  const drawn = () => !document.querySelector('[data-testid="stSkeleton"]')
    && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'));
  const idle = window.requestIdleCallback || ((then) => setTimeout(then, 50));
  const idleApp = () => document.querySelector('[data-testid="stApp"]')?.dataset.testScriptState === "notRunning";
  let retold = 0, quiet = 0;
  // Told, yet still here and unanswered while no run is on its way: the server never saw it (two components telling
  // at once from a new tab, the frame's and a fragment's, can lose one). Tell again with a new value, a few times.
  const check = () => {
    if (!parentElement.isConnected || parentElement.dataset.settled || retold >= data.retells) return;
    quiet = idleApp() ? quiet + 1 : 0;
    if (quiet * data.check_ms >= data.stuck_ms) { quiet = 0; retold += 1; parentElement.dataset.retold = String(retold); send(); }
    setTimeout(check, data.check_ms);
  };
  const send = () => { parentElement.dataset.told = String(performance.now()); setStateValue("idle", performance.now()); };
  const tell = () => { send(); setTimeout(check, data.check_ms); };
  const wait = () => (drawn() ? idle(() => setTimeout(tell, data.after_ms), { timeout: 1000 }) : setTimeout(wait, 50));
  wait();
}
"""
# The element has no content: keep Streamlit's gap between elements out of the page too.
_CSS = '[data-testid="stElementContainer"]:has(.when-idle) {\n  display: none;\n}\n'
_COMPONENT = st.components.v2.component("lifecycle_when_idle", js=_JS, css=_CSS, isolate_styles=False)


def when_idle(key: str, on_idle: Callable[[], None] = lambda: None, after_ms: int = AFTER_MS) -> bool:
    """Mount the component under ``key``; True once the browser has told (from that run on, for as long as
    the component is mounted in every run: leaving the page forgets it, so the next visit asks again). Its answer
    reruns the page, or only the ``st.fragment`` it is in."""
    told = idle_told(key)
    if not told and ThreadState.get().fragment_id is None:
        st.session_state[_PAGE_ASKS] = True
    _COMPONENT(key=key, data={"ask": not told, "after_ms": after_ms, **_RETELL}, on_idle_change=on_idle, height="content")
    return told


def page_asks() -> bool:
    """Whether this run of the page mounted a component, outside any fragment, that asks for the page's next run
    once the page is drawn (each run starts with ``start_run``)."""
    return bool(st.session_state.get(_PAGE_ASKS))


def start_run() -> None:
    st.session_state[_PAGE_ASKS] = False


def idle_told(key: str) -> bool:
    state = st.session_state.get(key)
    return bool(state and state.get("idle"))


def details_ready(key: str) -> bool:
    """Whether the page may build its details (everything under its picture): True from the run after the
    browser has drawn the first one and is idle (no wait after that: the picture is the first screen). Until then
    a one-line caption holds their place."""
    if when_idle(key, after_ms=0):
        return True
    st.caption(DETAILS_PENDING)
    return False
