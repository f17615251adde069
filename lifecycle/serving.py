"""Serving: the one-at-a-time model queue in front of the loaded model, and the server's live state.

The model runs one request at a time (``LoadedModel.lock``). API calls wait their turn in a bounded
first-in-first-out queue; when it is full a new call is refused at once (HTTP 503 with a
``retry-after`` estimate) instead of piling up. Everything a "Live calls" view needs is here:
whether the model is loading or ready, and every call that is queued or running right now
(position, waited seconds, tokens generated so far). Finished calls live in the SQLite call log.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from lifecycle.model import LoadedModel, is_loaded, model_name, shared_model

DEFAULT_QUEUE_CAPACITY = 8
# Waiting threads re-check cancellation this often, so a client that leaves is dropped quickly.
_POLL_SECONDS = 0.1


class QueueFull(Exception):
    """The model queue has no free place; ``retry_after`` is a whole number of seconds."""

    def __init__(self, waiting: int, retry_after: int):
        super().__init__(f"The model queue is full ({waiting} requests waiting); retry in {retry_after} s.")
        self.waiting = waiting
        self.retry_after = retry_after


@dataclass
class LiveCall:
    """One API call from admission until it leaves the queue. ``state``: queued -> running -> done."""

    id: str
    key_name: str | None
    model: str
    stream: bool
    prompt_tokens: int
    max_tokens: int
    received_at: float = field(default_factory=time.time)
    state: str = "queued"
    started_at: float | None = None
    completion_tokens: int = 0
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def waited_seconds(self) -> float:
        return (self.started_at or time.time()) - self.received_at


class ModelQueue:
    """A bounded FIFO of calls in front of ``loaded.lock``. ``capacity`` counts waiting calls only."""

    def __init__(self, capacity: int = DEFAULT_QUEUE_CAPACITY):
        self.capacity = capacity
        self._calls: list[LiveCall] = []
        self._cond = threading.Condition()
        self._mean_seconds = 5.0  # running mean of a call's model time, for retry-after estimates

    def admit(self, call: LiveCall) -> None:
        """Put a call at the back of the queue, or raise QueueFull without waiting."""
        with self._cond:
            waiting = sum(1 for c in self._calls if c.state == "queued")
            if waiting >= self.capacity:
                raise QueueFull(waiting, self._retry_after(waiting))
            self._calls.append(call)

    def _retry_after(self, waiting: int) -> int:
        return max(1, math.ceil((waiting + 1) * self._mean_seconds))

    @contextmanager
    def turn(self, call: LiveCall, loaded: LoadedModel) -> Iterator[bool]:
        """In the worker thread: wait until the call is first in line and holds the model lock.

        Yields True while holding ``loaded.lock``, or False if the call was cancelled while waiting.
        The call always leaves the queue afterwards.
        """
        holding = False
        try:
            holding = self._wait_for_turn(call, loaded)
            started = time.perf_counter()
            if holding:
                with self._cond:
                    call.state, call.started_at = "running", time.time()
            yield holding
        finally:
            if holding:
                loaded.lock.release()
                self._mean_seconds = 0.8 * self._mean_seconds + 0.2 * (time.perf_counter() - started)
            with self._cond:
                call.state = "done"
                self._calls.remove(call)
                self._cond.notify_all()

    def _wait_for_turn(self, call: LiveCall, loaded: LoadedModel) -> bool:
        with self._cond:
            while self._first_queued() is not call:
                if call.cancel.is_set():
                    return False
                self._cond.wait(_POLL_SECONDS)
        # First in line; the Streamlit pages may still hold the model lock for a while.
        while not loaded.lock.acquire(timeout=_POLL_SECONDS):
            if call.cancel.is_set():
                return False
        if call.cancel.is_set():
            loaded.lock.release()
            return False
        return True

    def _first_queued(self) -> LiveCall | None:
        return next((c for c in self._calls if c.state == "queued"), None)

    def snapshot(self) -> list[LiveCall]:
        """Copies of the calls queued or running now, in arrival order."""
        with self._cond:
            return [replace(c) for c in self._calls]


@dataclass(frozen=True)
class ModelStatus:
    """``state``: "idle" (not asked yet), "loading", "ready" or "failed" (``error`` says why)."""

    state: str
    name: str
    error: str | None = None
    load_seconds: float | None = None


_queue = ModelQueue(int(os.environ.get("LIFECYCLE_QUEUE_CAPACITY", DEFAULT_QUEUE_CAPACITY)))
_status = ModelStatus("idle", model_name())
_status_lock = threading.Lock()


def model_queue() -> ModelQueue:
    """The process-wide queue every API call goes through."""
    return _queue


def live_calls() -> list[LiveCall]:
    """The API calls queued or running right now (for the app's "Live calls" view)."""
    return _queue.snapshot()


def model_status() -> ModelStatus:
    """The shared model's state; "ready" also when a page loaded it before any API call."""
    if _status.state in ("idle", "loading") and is_loaded():
        loaded = shared_model()
        return ModelStatus("ready", loaded.name, load_seconds=loaded.load_seconds)
    return _status


def start_model_loading() -> None:
    """Load the shared model in a background thread (once per process) so no request pays for it."""
    global _status
    with _status_lock:
        if _status.state != "idle":
            return
        _status = ModelStatus("loading", model_name())
    threading.Thread(target=_load, name="model-loader", daemon=True).start()


def _load() -> None:
    global _status
    try:
        loaded = shared_model()
        _status = ModelStatus("ready", loaded.name, load_seconds=loaded.load_seconds)
    except Exception as error:  # any failure must show up in /health, not kill a thread silently
        _status = ModelStatus("failed", model_name(), error=f"{type(error).__name__}: {error}")

