"""The engine-state section: the batch as it runs, refreshed live, for Live calls (and any page that shows the queue).

It reads ``lifecycle.engine.Engine.state()`` every ``FASTEST_SECONDS`` in a fragment (slower when many sessions
watch: ui.audience), so only this section reruns: which requests are in this step's batch, the batch size of
each recent step, who waits for a place, and the whole server's tokens per second. Other people's requests show
only where they came from (a page, the API, the warm command), never their prompt or call id.
"""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from charts.engine import batch_timeline, running_rows, waiting_rows
from lifecycle.engine import shared_engine
from lifecycle.engine.scheduler import RATE_WINDOW_SECONDS, recent_rate
from lifecycle.errors import LifecycleError
from lifecycle.lessons.live_calls import engine_lesson, refresh_note
from lifecycle.model import is_loaded, shared_model
from lifecycle.results import engine_tag, shared_results
from ui.audience import Audience, paced_interval, repace
from ui.settings import JourneySettings
from ui.tables import fitted_table

FASTEST_SECONDS = 1.0
# A run of this panel takes ~30 ms of the server's Python (its metrics, sentence and chart): five a second for
# the whole room is about 15% of one core.
ENGINE_PANELS = Audience(runs_per_second=5.0)


def engine_section(settings: JourneySettings | None = None) -> None:
    """Subheader, live panel and a short explanation; ``settings`` marks this session's own request."""
    st.subheader("The engine: every model call, batched", anchor=False)
    if not is_loaded():
        st.caption("The model is still loading; the engine starts with it.")
        return
    mine = _my_tag(settings) if settings is not None else None
    interval, _ = paced_interval(ENGINE_PANELS, FASTEST_SECONDS)
    st.fragment(_panel, run_every=interval)(mine, interval)


def _my_tag(settings: JourneySettings) -> str | None:
    try:
        return engine_tag(shared_results(shared_model()).answer_key(settings.journey_input()))
    except LifecycleError:  # an unusable prompt simply has no request to point at
        return None


def _panel(mine: str | None, interval: float) -> None:
    watchers = repace(ENGINE_PANELS, FASTEST_SECONDS, interval)
    state = shared_engine(shared_model()).state()
    now = time.time()
    recent = [s for s in state.steps if s.time >= now - RATE_WINDOW_SECONDS]
    mean_batch = sum(s.batch_size for s in recent) / len(recent) if recent else 0.0
    generated, span, rate = recent_rate(state.steps, now)
    columns = st.columns(4)
    columns[0].metric("In the batch now", len(state.running), help=f"At most {state.max_batch} at once.")
    columns[1].metric("Waiting", len(state.waiting), help=f"Pages always get a place in line; API calls beyond "
                      f"{state.queue_capacity} waiting get a 503 queue_full with retry-after.")
    columns[2].metric("Server tokens/s", f"{rate:,.1f}", help=f"Every request's generated tokens since the first "
                      f"model step of the last {RATE_WINDOW_SECONDS:.0f} s began.")
    columns[3].metric("Mean batch size", f"{mean_batch:.1f}", help=f"Over the {len(recent)} steps of the last "
                      f"{RATE_WINDOW_SECONDS:.0f} s.")
    st.markdown(engine_lesson(RATE_WINDOW_SECONDS, len(recent), mean_batch, generated, span, rate, state.jobs))
    st.plotly_chart(batch_timeline(state.steps, now), key="engine_timeline", theme=None)
    st.caption("One bar per model step: orange steps also read new prompts (prefill), blue ones only decode. "
               "Hover a bar for its tokens and time.")
    st.caption(refresh_note(interval, watchers, FASTEST_SECONDS))
    st.caption(f"Kernels on this machine — {state.kernels}.")
    # Where a whole table would not fit (a phone; a projector with the sidebar open) it narrows to who is in the batch
    # and where each stands, all columns in an expander.
    if state.running:
        fitted_table(pd.DataFrame(running_rows(state.running, mine)), ["from", "phase", "generated"],
                     key="engine_running", full_from=640, narrow_widths={"from": 130, "phase": 140, "generated": 70},
                     hide_index=True)
    if state.waiting:
        fitted_table(pd.DataFrame(waiting_rows(state.waiting, mine)), {"place in line": "place", "from": "from"},
                     key="engine_waiting", full_from=480, narrow_widths={"place": 60, "from": 200}, hide_index=True)
