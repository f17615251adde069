"""Serving: the API's admission in front of the engine, and the server's live state.

Every model call runs in the shared engine (lifecycle.engine), which batches concurrent requests.
API calls are admitted here first: when too many are already waiting for the engine a new call is
refused at once (HTTP 503 with a ``retry-after`` estimate) instead of piling up. Everything a
"Live calls" view needs is here: whether the model is loading or ready, and every call that is
queued (waiting for the engine to start it) or running now (position, waited seconds, tokens
generated so far). Finished calls live in the SQLite call log.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from lifecycle.stages.context_window import shared_head
from lifecycle.engine import engine_problem, origin, shared_engine
from lifecycle.engine.scheduler import DEFAULT_QUEUE_CAPACITY
from lifecycle.model import LoadedModel, is_loaded, model_name, shared_model

_log = logging.getLogger(__name__)
LOADER_THREAD = "model-loader"  # loads the model, builds the engine, primes it and builds the hooked model


class QueueFull(Exception):
    """No free place in the queue; ``retry_after`` is a whole number of seconds."""

    def __init__(self, waiting: int, retry_after: int):
        super().__init__(f"The model queue is full ({waiting} requests waiting); retry in {retry_after} s.")
        self.waiting = waiting
        self.retry_after = retry_after


@dataclass
class LiveCall:
    """One API call from admission until it leaves. ``state``: queued -> running (the engine
    started its prefill) -> done."""

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
    """The API calls admitted and not yet finished. ``capacity`` counts calls still waiting for the
    engine; the engine's own waiting queue (pages included) is checked too."""

    def __init__(self, capacity: int = DEFAULT_QUEUE_CAPACITY):
        self.capacity = capacity
        self._calls: list[LiveCall] = []
        self._lock = threading.Lock()

    def admit(self, call: LiveCall) -> None:
        """Accept a call, or raise QueueFull without waiting."""
        engine = shared_engine(shared_model()) if is_loaded() else None
        with self._lock:
            waiting = sum(1 for c in self._calls if c.state == "queued")
            if engine is not None:
                waiting = max(waiting, engine.waiting_count())
            if waiting >= min(self.capacity, engine.queue_capacity if engine else self.capacity):
                retry = engine.retry_after(waiting) if engine else 1
                raise QueueFull(waiting, retry)
            self._calls.append(call)

    @contextmanager
    def turn(self, call: LiveCall, loaded: LoadedModel) -> Iterator[bool]:
        """In the worker thread: the block in which the call's generation is submitted to the engine.

        Yields False if the call was cancelled before it began, else True; engine requests made
        inside are labelled "api" with the call's id, and the call turns "running" when the engine
        starts its prefill. The call always leaves the queue afterwards.
        """

        def started(_waited: float) -> None:
            with self._lock:
                call.state, call.started_at = "running", time.time()

        try:
            with origin("api", call.id, started=started, bounded=True):
                yield not call.cancel.is_set()
        finally:
            with self._lock:
                call.state = "done"
                self._calls.remove(call)

    def snapshot(self) -> list[LiveCall]:
        """Copies of the calls queued or running now, in arrival order."""
        with self._lock:
            return [replace(c) for c in self._calls]


@dataclass(frozen=True)
class ModelStatus:
    """``state``: "idle" (not asked yet), "loading", "ready", "unhealthy" (the engine failed or is
    stuck; another takes over) or "failed" (``error`` says why)."""

    state: str
    name: str
    error: str | None = None
    load_seconds: float | None = None


_queue = ModelQueue(int(os.environ.get("LIFECYCLE_QUEUE_CAPACITY", DEFAULT_QUEUE_CAPACITY)))
_status = ModelStatus("idle", model_name())
_status_lock = threading.Lock()
_pages_failed = False  # the loader could not build what the pages need (they raise its error themselves)
_page_work: list[Callable[[], None]] = []  # before_pages_ready's work the loader has still to run
_page_work_done: list[Callable[[], None]] = []
_loader_done = False  # the loader has built what the pages need and run _page_work


def model_queue() -> ModelQueue:
    """The process-wide queue every API call goes through."""
    return _queue


def live_calls() -> list[LiveCall]:
    """The API calls queued or running right now (for the app's "Live calls" view)."""
    return _queue.snapshot()


def model_status() -> ModelStatus:
    """The shared model's state; "ready" also when a page loaded it before any API call, and
    "unhealthy" while its engine has failed or is stuck (a new one is then being built)."""
    status = _status
    if status.state == "idle" and is_loaded():  # "loading" stays until the engine is built and primed
        loaded = shared_model()
        status = ModelStatus("ready", loaded.name, load_seconds=loaded.load_seconds)
    if status.state == "ready":
        problem = engine_problem(shared_model())
        if problem is not None:
            return ModelStatus("unhealthy", status.name, error=problem, load_seconds=status.load_seconds)
    return status


def pages_state() -> str:
    """Whether a page's own model work can start at once: "ready" once the Hugging Face model the pages'
    inspection passes hook is built (the loader builds it after the engine's first job, so the API is
    served a few seconds earlier) and the work registered with ``before_pages_ready`` is done, "loading"
    before, "failed" if the loader could not build the model."""
    if _pages_failed:
        return "failed"
    ready = is_loaded() and shared_model().hf_model is not None and not _page_work
    return "ready" if ready else "loading"


def engine_load() -> dict[str, int] | None:
    """The engine's work in hand (``Engine.load``: its batch, its waiting requests, page jobs), or None while the
    model loads: what `/health` shows a teacher, and a late browser test, of how busy the server is."""
    return shared_engine(shared_model()).load() if is_loaded() else None


def start_model_loading() -> None:
    """Load the shared model in a background thread (once per process) so no request pays for it."""
    global _status
    with _status_lock:
        if _status.state != "idle":
            return
        _status = ModelStatus("loading", model_name())
    threading.Thread(target=_load, name=LOADER_THREAD, daemon=True).start()


def _load() -> None:
    global _status, _pages_failed
    try:
        loaded = shared_model()
        engine = shared_engine(loaded)  # built now, not by the first request
    except Exception as error:  # any failure must show up in /health, not kill a thread silently
        _status = ModelStatus("failed", model_name(), error=f"{type(error).__name__}: {error}")
        return
    _status = ModelStatus("ready", loaded.name, load_seconds=loaded.load_seconds)
    # The API is served now. The engine's first job puts the chat template's system turn in the prefix
    # cache before a class's first prompts arrive at once (rendering it costs ~0.2 s: the template's
    # Jinja environment and the vocabulary's byte table; a request sent meanwhile computes its prompt
    # whole). A model whose template the app cannot render fails here, as it would on the first call.
    try:
        priming = engine.prime(shared_head(), label="chat template")
    except Exception as error:  # noqa: BLE001 - reported by /health, as a failed load is
        _status = ModelStatus("failed", loaded.name, error=f"{type(error).__name__}: {error}")
        return
    # Then what only the pages need, before the first visitor needs it: the Hugging Face model their
    # inspection passes hook, on the engine's tensors (a page that comes first waits).
    try:
        priming.wait()
        _ = loaded.model
    except Exception:  # noqa: BLE001 - the request or page that needs it raises the same error, with its message
        _pages_failed = True
        _log.exception("the template prefix or the Hugging Face model could not be built")
        return
    _prepare_pages()


def before_pages_ready(work: Callable[[], None]) -> None:
    """Have the loader run ``work`` once it has built what the pages need, before ``pages_state`` says "ready" (the
    app imports its pages' modules so: a class arriving then does not wait on the first visitor's import); at once,
    here, if the loader is already past that point. ``work`` already registered is not run again."""
    with _status_lock:
        if work in _page_work or work in _page_work_done:
            return
        if not _loader_done:
            _page_work.append(work)
            return
        _page_work_done.append(work)
    _run_page_work(work)


def _prepare_pages() -> None:
    """The loader's last step: the work registered with ``before_pages_ready``, one after the other."""
    global _loader_done
    while True:
        with _status_lock:
            if not _page_work:
                _loader_done = True
                return
            work = _page_work[0]
        _run_page_work(work)
        with _status_lock:
            _page_work.remove(work)
            _page_work_done.append(work)


def _run_page_work(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception:  # noqa: BLE001 - optional: a page needing it does it again and shows the error there
        _log.exception("work before the pages were ready failed")

