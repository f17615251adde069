"""How many sessions watch a live panel, so that the room's refreshes keep to a budget.

A live panel (the engine's batch, the calls in flight) is a fragment that reruns every second or two.
Each run costs the server tens of milliseconds of Python: five idle Live calls tabs took 18% of one core,
measured, so 60 people watching would take both cores, the model's. A panel's refresh interval therefore
grows with the number of sessions watching it: together they run about ``runs_per_second`` times a second,
and a panel watched alone refreshes at its ``fastest`` interval.

``Audience`` is plain Python (a test can count with it); ``paced_interval`` and ``repace`` are the Streamlit
side: the interval a page registers its fragment with, and the rerun that registers it anew when the room
asks for an interval half as long again, or two thirds as long, as the one registered.
"""

from __future__ import annotations

import threading
import time

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

GONE_AFTER = 2.0  # a session that missed two of its refreshes has left (closed its tab, changed page)
REPACE_AT = 1.5  # a full page run is dearer than a panel's: only a change of half the interval again registers anew


class Audience:
    """The sessions that watch one kind of panel, each with the interval it refreshes at."""

    def __init__(self, runs_per_second: float) -> None:
        self.runs_per_second = runs_per_second
        self._seen: dict[str, tuple[float, float]] = {}  # session -> (last refresh, its interval)
        self._lock = threading.Lock()

    def watch(self, session: str, interval: float, now: float) -> int:
        """Note that ``session`` refreshed at ``now`` and refreshes every ``interval`` s; how many watch now."""
        with self._lock:
            self._seen[session] = (now, interval)
            return self._count(now)

    def watchers(self, now: float, joining: str | None = None) -> int:
        """How many sessions watch at ``now``, ``joining`` counted whether or not it watched before."""
        with self._lock:
            return self._count(now) + (joining is not None and joining not in self._seen)

    def interval(self, fastest: float, watchers: int) -> float:
        """The refresh interval for ``watchers`` sessions: ``fastest``, or slower so that together they keep to
        ``runs_per_second``."""
        return max(fastest, watchers / self.runs_per_second)

    def _count(self, now: float) -> int:
        for session, (seen, interval) in list(self._seen.items()):
            if now - seen > GONE_AFTER * interval + 1.0:
                del self._seen[session]
        return len(self._seen)


def _session() -> str:
    context = get_script_run_ctx()
    return context.session_id if context is not None else "no session"


def paced_interval(audience: Audience, fastest: float) -> tuple[float, int]:
    """The interval this session's panel refreshes at, and how many watch it with this session."""
    now, session = time.time(), _session()
    watchers = audience.watchers(now, joining=session)
    interval = audience.interval(fastest, watchers)
    audience.watch(session, interval, now)
    return interval, watchers


def repace(audience: Audience, fastest: float, interval: float) -> int:
    """In the panel's own run: note this refresh; rerun the page when the room asks for an interval ``REPACE_AT``
    times this one or more (or as much less), so the fragment is registered anew at it. How many watch."""
    watchers = audience.watch(_session(), interval, time.time())
    wanted = audience.interval(fastest, watchers)
    if wanted >= REPACE_AT * interval or wanted <= interval / REPACE_AT:
        st.rerun(scope="app")
    return watchers
