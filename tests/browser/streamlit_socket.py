"""A page's Streamlit websocket, read as the app reads it: every message decoded with Streamlit's own protobufs.

What the browser asked the server for (a page run, or a fragment's run: ``fragment_id`` set) and how the
server said each run ended are facts off the wire, not guesses from the DOM: React may batch a short run's
"running" and "not running" into one render, so the page's script-state attribute can miss a run entirely.
"""

from __future__ import annotations

import time

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

FRAGMENT_FINISHED = "FINISHED_FRAGMENT_RUN_SUCCESSFULLY"


class Socket:
    """Every message on the page's Streamlit websocket, decoded, in order; each received one with the
    ``time.perf_counter()`` it arrived at."""

    def __init__(self, page) -> None:
        self.page = page
        self.sent: list[BackMsg] = []
        self.received: list[tuple[float, ForwardMsg]] = []
        page.on("websocket", self._watch)

    def _watch(self, socket) -> None:
        socket.on("framesent", self._sent)
        socket.on("framereceived", self._received)

    def _sent(self, payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            message = BackMsg()
            message.ParseFromString(payload)
            self.sent.append(message)

    def _received(self, payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            message = ForwardMsg()
            message.ParseFromString(payload)
            self.received.append((time.perf_counter(), message))

    def reruns(self) -> list[BackMsg]:
        return [m for m in self.sent if m.WhichOneof("type") == "rerun_script"]

    def finishes(self) -> list[tuple[float, str]]:
        """Each ended run: when its end arrived and how it ended."""
        return [(at, ForwardMsg.ScriptFinishedStatus.Name(m.script_finished)) for at, m in self.received
                if m.WhichOneof("type") == "script_finished"]

    def finished(self) -> list[str]:
        return [status for _, status in self.finishes()]

    def run_after(self, act, timeout_s: float = 90.0) -> tuple[list[BackMsg], float, str]:
        """Do ``act`` and wait until every run it asked for has ended: those runs, the seconds from ``act`` to
        the last one's end arriving, and how that run ended."""
        reruns, finishes = len(self.reruns()), len(self.finishes())
        started = time.perf_counter()
        act()
        deadline = started + timeout_s
        while True:
            asked, ended = self.reruns()[reruns:], self.finishes()[finishes:]
            if asked and len(ended) >= len(asked):
                at, status = ended[-1]
                return asked, at - started, status
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{len(asked)} runs asked for, {len(ended)} ended in {timeout_s:.0f} s")
            self.page.wait_for_timeout(10)  # lets Playwright deliver the socket's frames
