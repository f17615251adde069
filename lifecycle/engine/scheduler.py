"""The engine: one scheduler thread runs the model for every request, batching them step by step.

Continuous batching: between two model steps, requests join (their prompts are prefilled in
chunks, shortest remaining prompt first, so a long prompt never holds a short one up for more than
one chunk) and leave (finished, cancelled, or failed). Each step runs every decoding request's
newest token and the step's prefill chunks through the model together, then hands each request
that reached a new position its next-token logits through its own ``step`` callable, which picks
the token to feed next. Exclusive jobs (``run``) get the Hugging Face model between two steps;
a sliced job (``run_sliced``, the inspection pass one layer at a time) gets it for one slice between
two steps, so a stream never waits for a whole pass.

The engine cannot take its callers down with it. Whatever escapes the scheduler thread (a
``BaseException`` included) fails every request and job it held with ``EngineUnavailable`` (the
API's 503) and a new engine takes over (``shared_engine``). A thread that makes no progress for
``LIFECYCLE_ENGINE_STALL_SECONDS`` while it holds work counts as stuck, and no caller waits longer
than ``LIFECYCLE_ENGINE_WAIT_SECONDS`` for a job. Requests longer than a pool slot get a KV cache of
their own, admitted only while those caches fit ``LIFECYCLE_LONG_KV_MB``.

A step of more requests than the packed kernels take (a class) runs on ``LIFECYCLE_ROOM_THREADS`` torch threads
(every core by default); every other step, and the jobs between steps, on the configured count.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch

from lifecycle.errors import LifecycleError
from lifecycle.engine.kernel_choice import BATCH_ROWS
from lifecycle.engine.llama import KVCache, LlamaStack, Segment
from lifecycle.engine.packed_store import STORE_FILE
from lifecycle.model import verified_copy
from lifecycle.engine.prefix import PrefixCache, PrefixStats, budget_bytes

DEFAULT_QUEUE_CAPACITY = 32
DEFAULT_MAX_BATCH = 32
DEFAULT_PREFILL_CHUNK = 256
DEFAULT_SLOT_TOKENS = 512
DEFAULT_LONG_KV_MB = 512
DEFAULT_WAIT_SECONDS = 600.0
DEFAULT_STALL_SECONDS = 120.0
POLL_SECONDS = 0.25
TAKEOVER_LOCK_SECONDS = 10.0
RECENT_STEPS = 200
RATE_WINDOW_SECONDS = 10.0
# While busy, the few-row timing gets at most this share of the engine's time, one product between two steps.
FEW_ROWS_BUSY_SHARE = 0.2
# A step of more requests than the packed kernels take (a class) runs on every core: the app keeps one core for a
# browser beside it (one torch thread), which suits one learner, but a class's browsers are elsewhere, and 60 sessions
# finished Generation ~20% sooner on two threads (docs/benchmark-history.md).
ROOM_REQUESTS = max(BATCH_ROWS)
ROOM_THREADS_ENV = "LIFECYCLE_ROOM_THREADS"

_log = logging.getLogger(__name__)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return max(1, int(value)) if value else default


def _env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return max(0.1, float(value)) if value else default


class EngineUnavailable(RuntimeError):
    """The engine failed or is stuck, so this request or job was not (fully) served. The API answers
    503: the message says what happened; a new engine takes over, or the server must be restarted."""


class EngineTimeout(EngineUnavailable):
    """A caller waited longer than its deadline for the engine."""


class RequestTooLarge(LifecycleError):
    """A request whose KV cache can never fit the memory this server gives long requests (the API's 400)."""

    def __init__(self, message: str):
        super().__init__(message, param="max_tokens", code="request_too_large")


class EngineFull(Exception):
    """The engine's waiting queue has no free place; ``retry_after`` is a whole number of seconds."""

    def __init__(self, waiting: int, retry_after: int):
        super().__init__(f"The model queue is full ({waiting} requests waiting); retry in {retry_after} s.")
        self.waiting = waiting
        self.retry_after = retry_after


@dataclass
class EngineRequest:
    """What to generate from. ``step`` gets the next-token logits (fp32 numpy, shape (vocab,)) after
    the prompt and after every fed token, in the engine thread, and returns the token id to feed
    next or None to finish. ``tag`` is the caller's own id for this request (e.g. an API call id);
    ``started`` (optional) is called in the engine thread with the seconds waited when its prefill
    begins. A ``bounded`` request (an API call) is refused with EngineFull when the waiting queue is
    full; the others (pages, the warm route) always get a place in line, which the pages show."""

    prompt_ids: list[int]
    max_tokens: int
    step: Callable[[np.ndarray], int | None]
    cancelled: Callable[[], bool] = lambda: False
    label: str = "page"
    tag: str | None = None
    started: Callable[[float], None] | None = None
    bounded: bool = False


class EngineHandle:
    """A submitted request as it runs. ``done`` is set when it has left the engine; ``error`` then
    holds what failed it (None for a normal or cancelled end)."""

    def __init__(self, request_id: int, request: EngineRequest, engine: Engine | None = None):
        self.id = request_id
        self.request = request
        self.engine = engine
        self.done = threading.Event()
        self.error: Exception | None = None
        self.cancelled = False
        self.submitted_at = time.perf_counter()
        self.started_at: float | None = None
        self.waited_seconds = 0.0
        self.prefill_seconds = 0.0
        self.cached_tokens = 0
        self.generated = 0
        self.phase = "waiting"
        # What was in the engine when it arrived: the labels of the requests running or waiting, and
        # how many exclusive jobs (inspection passes, measurements) were queued or running.
        self.ahead: tuple[str, ...] = ()
        self.jobs_ahead = 0
        self._cancel = threading.Event()

    def cancel(self) -> None:
        """Ask the engine to drop this request at its next step (or before it starts)."""
        self._cancel.set()

    def wants_out(self) -> bool:
        return self._cancel.is_set() or bool(self.request.cancelled())

    def wait(self) -> None:
        """Until the request has left the engine; EngineUnavailable if the engine fails or sticks first."""
        while not self.done.wait(POLL_SECONDS):
            self.check()

    def check(self) -> None:
        """Raise EngineUnavailable when the engine running this request has failed or is stuck."""
        if self.engine is not None and not self.done.is_set():
            problem = self.engine.problem()
            if problem is not None:
                raise EngineUnavailable(problem)


@dataclass(frozen=True)
class RunningRequest:
    id: int
    label: str
    tag: str | None
    prompt_tokens: int
    generated: int
    phase: str  # "prefill" or "decode"
    cached_tokens: int
    waited_seconds: float | None  # None until its first prefill chunk runs


@dataclass(frozen=True)
class WaitingRequest:
    id: int
    label: str
    tag: str | None
    position: int  # 1 = next to start


@dataclass(frozen=True)
class StepRecord:
    time: float  # epoch seconds at the end of the step
    batch_size: int
    request_ids: tuple[int, ...]
    prefill_tokens: int
    decode_tokens: int
    generated_tokens: int
    seconds: float


@dataclass(frozen=True)
class EngineState:
    running: list[RunningRequest]
    waiting: list[WaitingRequest]
    steps: list[StepRecord]
    tokens_per_second: float
    prefix_cache: PrefixStats
    queue_capacity: int
    max_batch: int
    prefill_chunk: int
    kernels: str = ""  # which matrix product each kind of step runs (LlamaStack.kernels)
    jobs: int = 0  # page jobs in hand (inspection passes, timings), the one running included: one at a time


@dataclass
class _Active:
    """A request in the running batch: its KV cache, how far its prompt has run, its next token."""

    handle: EngineHandle
    cache: KVCache
    fed: list[int]  # tokens whose keys and values are in ``cache`` or about to be
    position: int  # prompt tokens done
    next_token: int | None = None

    @property
    def prompt(self) -> list[int]:
        return self.handle.request.prompt_ids

    @property
    def prefilling(self) -> bool:
        return self.position < len(self.prompt)


@dataclass
class _Job:
    """Work on the Hugging Face model: ``work(model)`` runs at once, or, when ``sliced``, returns a
    generator that runs one slice (up to its next ``yield``) between two steps."""

    work: Callable
    sliced: bool = False
    slices: Iterator | None = None
    started: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    result: object = None
    error: BaseException | None = None


class Engine:
    """Runs ``loaded``'s model for every caller; see the module docstring."""

    def __init__(self, loaded, queue_capacity: int | None = None, max_batch: int | None = None,
                 prefill_chunk: int | None = None, prefix_cache_bytes: int | None = None):
        self.loaded = loaded
        self.queue_capacity = queue_capacity or _env_int("LIFECYCLE_QUEUE_CAPACITY", DEFAULT_QUEUE_CAPACITY)
        self.max_batch = max_batch or _env_int("LIFECYCLE_MAX_BATCH", DEFAULT_MAX_BATCH)
        self.prefill_chunk = prefill_chunk or _env_int("LIFECYCLE_PREFILL_CHUNK", DEFAULT_PREFILL_CHUNK)
        self.prefix_cache = PrefixCache(budget_bytes() if prefix_cache_bytes is None else prefix_cache_bytes)
        self.long_kv_bytes = _env_int("LIFECYCLE_LONG_KV_MB", DEFAULT_LONG_KV_MB) * 2**20
        self.wait_seconds = _env_seconds("LIFECYCLE_ENGINE_WAIT_SECONDS", DEFAULT_WAIT_SECONDS)
        self.stall_seconds = _env_seconds("LIFECYCLE_ENGINE_STALL_SECONDS", DEFAULT_STALL_SECONDS)
        self.threads = torch.get_num_threads()  # the configured count (the app's: the cores minus one)
        self.room_threads = max(self.threads, _env_int(ROOM_THREADS_ENV, os.cpu_count() or 1))
        self.failure: str | None = None  # set once: why this engine stopped serving
        self._progress_at = time.monotonic()
        self._next_busy_product = 0.0  # monotonic time before which a busy engine times no few-row product
        self._long_kv_in_use = 0
        self._cond = threading.Condition()
        self._waiting: deque[EngineHandle] = deque()
        self._running: list[_Active] = []
        self._jobs: deque[_Job] = deque()
        self._steps: deque[StepRecord] = deque(maxlen=RECENT_STEPS)
        self._ids = itertools.count(1)
        self._closed = False
        self._mean_request_seconds = 5.0
        self._built = threading.Event()
        self._build_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run_thread, name="engine", daemon=True)
        self._thread.start()
        self._built.wait()
        if self._build_error is not None:
            raise self._build_error

    # --- callers -------------------------------------------------------------------------------

    def submit(self, request: EngineRequest) -> EngineHandle:
        """Queue a request; raise EngineFull at once when it is bounded and the queue is full, RequestTooLarge
        when its KV cache could never be admitted, EngineUnavailable when this engine has stopped."""
        needed = self._long_kv_need(len(request.prompt_ids) + request.max_tokens)
        if needed > self.long_kv_bytes:
            raise RequestTooLarge(
                f"This request needs {needed / 2**20:,.0f} MB of KV cache ({len(request.prompt_ids):,} prompt tokens "
                f"+ {request.max_tokens:,} max_tokens); this server gives requests longer than "
                f"{self.pool.slot_tokens:,} positions {self.long_kv_bytes / 2**20:,.0f} MB in all "
                "(LIFECYCLE_LONG_KV_MB). Send a shorter prompt or a smaller max_tokens.")
        with self._cond:
            if self.failure is not None:
                raise EngineUnavailable(self.failure)
            waiting = len(self._waiting)
            if request.bounded and waiting >= self.queue_capacity:
                raise EngineFull(waiting, self.retry_after(waiting))
            self._note_arrival()
            handle = EngineHandle(next(self._ids), request, self)
            handle.ahead = tuple(a.handle.request.label for a in self._running) + tuple(
                h.request.label for h in self._waiting)
            handle.jobs_ahead = len(self._jobs)
            self._waiting.append(handle)
            self._cond.notify_all()
        return handle

    def prime(self, prompt_ids: list[int], label: str = "prefix") -> EngineHandle:
        """Prefill ``prompt_ids`` into the prefix cache, generating nothing, so prompts that start with
        them (e.g. the chat template's system turn) compute only what follows."""
        return self.submit(EngineRequest(list(prompt_ids), 1, lambda logits: None, label=label))

    def run(self, work: Callable):
        """Run ``work(model)`` on the scheduler thread between two steps; return its result or raise."""
        return self._run_job_here(_Job(work)) if threading.current_thread() is self._thread else self._await(_Job(work))

    def run_sliced(self, work: Callable):
        """Run ``work(model)``, a generator, one slice (up to its next ``yield``) between two steps;
        return what the generator returns, or raise what it raised."""
        job = _Job(work, sliced=True)
        return self._run_job_here(job) if threading.current_thread() is self._thread else self._await(job)

    def _run_job_here(self, job: _Job):
        while not job.done.is_set():
            self._run_slice(job)
        if job.error is not None:
            raise job.error
        return job.result

    def _await(self, job: _Job):
        with self._cond:
            if self.failure is not None:
                raise EngineUnavailable(self.failure)
            self._note_arrival()
            self._jobs.append(job)
            self._cond.notify_all()
        deadline = time.monotonic() + self.wait_seconds
        while not job.done.wait(POLL_SECONDS):
            problem = self.problem()
            if problem is not None:
                raise EngineUnavailable(problem)
            if time.monotonic() > deadline:
                with self._cond:
                    if job in self._jobs and job.slices is None:
                        self._jobs.remove(job)
                raise EngineTimeout(f"An engine job waited {self.wait_seconds:.0f} s without finishing "
                                    "(LIFECYCLE_ENGINE_WAIT_SECONDS); the server is overloaded or stuck.")
        if job.error is not None:
            raise job.error
        return job.result

    def problem(self) -> str | None:
        """Why this engine cannot serve now, or None. An engine found stuck (holding work without
        progress) is retired here, so the next ``shared_engine`` call builds one that takes over."""
        if self.failure is not None:
            return self.failure
        stalled = time.monotonic() - self._progress_at
        if stalled > self.stall_seconds and self._holds_work():
            self.retire(f"The engine made no progress for {stalled:.0f} s while requests waited "
                        "(LIFECYCLE_ENGINE_STALL_SECONDS): it is stuck, so its requests were failed and a new "
                        "engine takes over.")
            return self.failure
        if not self._thread.is_alive():
            return "The engine's scheduler thread is gone."
        return None

    def _note_arrival(self) -> None:
        """Work arriving at an idle engine starts its progress clock (lock held)."""
        if not (self._jobs or self._waiting or self._running):
            self._progress_at = time.monotonic()

    def _holds_work(self) -> bool:
        with self._cond:
            return bool(self._jobs or self._waiting or self._running)

    def waiting_count(self) -> int:
        with self._cond:
            return len(self._waiting)

    def load(self) -> dict[str, int]:
        """How much work the engine holds: requests in its batch, requests waiting for a place, and page jobs
        (inspection passes, run one at a time between steps, first come first served)."""
        with self._cond:
            return {"running": len(self._running), "waiting": len(self._waiting), "jobs": len(self._jobs)}

    def retry_after(self, waiting: int) -> int:
        """Seconds until a place is likely free: the waiting requests, a batch at a time."""
        batches = (waiting + 1) / self.max_batch
        return max(1, math.ceil(batches * self._mean_request_seconds))

    def state(self) -> EngineState:
        with self._cond:
            running = [
                RunningRequest(a.handle.id, a.handle.request.label, a.handle.request.tag, len(a.prompt),
                               a.handle.generated, "prefill" if a.prefilling else "decode", a.handle.cached_tokens,
                               a.handle.waited_seconds if a.handle.started_at is not None else None)
                for a in self._running
            ]
            waiting = [WaitingRequest(h.id, h.request.label, h.request.tag, i + 1) for i, h in enumerate(self._waiting)]
            steps = list(self._steps)
            jobs = len(self._jobs)
        return EngineState(running, waiting, steps, _rate(steps), self.prefix_cache.stats(),
                           self.queue_capacity, self.max_batch, self.prefill_chunk, self.stack.kernels, jobs)

    # --- the scheduler thread ------------------------------------------------------------------

    def retire(self, reason: str) -> None:
        """Stop serving: every request and job this engine holds fails with ``reason`` (EngineUnavailable)."""
        with self._cond:
            if self.failure is None:
                self.failure = reason
            self._closed = True
            running, waiting, jobs = list(self._running), list(self._waiting), list(self._jobs)
            self._running.clear()
            self._waiting.clear()
            self._jobs.clear()
            self._cond.notify_all()
        failure = EngineUnavailable(self.failure)
        for handle in [a.handle for a in running] + waiting:
            handle.error = handle.error or failure
            self._finish_handle(handle)
        for job in jobs:
            job.error = failure
            job.done.set()

    def close(self) -> None:
        """Stop the scheduler thread after its current step (at interpreter exit)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    def _run_thread(self) -> None:
        """Build the fused model and the KV pool here, then schedule: all of the engine's PyTorch work
        runs in this one thread. (A second thread doing PyTorch work keeps its own OpenMP threads;
        with more of them than cores, OpenMP parks them between the ~450 small parallel regions of a
        decode step: measured on 2 cores, 43 ms a step against 35 ms.)"""
        try:
            if not self.loaded.lock.acquire(timeout=TAKEOVER_LOCK_SECONDS):
                raise EngineUnavailable("The model is held by an engine that is stuck, so no new engine can take "
                                        "over: restart the server.")
            try:
                self.stack = build_stack(self.loaded)
            finally:
                self.loaded.lock.release()
            # Requests up to this many positions (prompt + max_tokens) decode in one batched pool.
            self.pool = self.stack.new_pool(self.max_batch, _env_int("LIFECYCLE_SLOT_TOKENS", DEFAULT_SLOT_TOKENS))
        except BaseException as error:  # noqa: BLE001 - handed to the constructor's caller
            self._build_error = error
            return
        finally:
            self._built.set()
        try:
            self._loop()
        except BaseException as error:  # noqa: BLE001 - nothing may leave a caller waiting for a dead thread
            _log.critical("the engine's scheduler thread failed; a new engine takes over", exc_info=error)
            self.retire(f"The engine stopped ({type(error).__name__}: {str(error)[:200]}); its requests were "
                        "failed and a new engine takes over.")
            with _engines_lock:
                shared = _engines.get(id(self.loaded), (None, None))[1] is self
            if shared:
                threading.Thread(target=_take_over, args=(self.loaded,), name="engine-takeover", daemon=True).start()

    def _loop(self) -> None:
        worked = False
        while True:
            # Once timed, the step loop takes no extra lock here; while idle it times one product, then looks again.
            if worked and self.stack.few_rows_untimed() and self._time_few_rows_product():
                continue
            with self._cond:
                while not (self._jobs or self._waiting or self._running or self._closed):
                    self._cond.wait()
                    self._progress_at = time.monotonic()
                if self._closed:
                    return
                job = self._jobs[0] if self._jobs else None
            worked = True
            if job is not None:
                self._run_slice(job)
                if job.done.is_set():
                    with self._cond:
                        if job in self._jobs:
                            self._jobs.remove(job)
            self._progress_at = time.monotonic()
            try:
                self._leave_cancelled()
                self._admit()
                if self._running:
                    self._step()
            except Exception as error:  # noqa: BLE001 - a scheduler bug fails the batch, never hangs it
                _log.exception("engine step failed")
                for active in list(self._running):
                    active.handle.error = active.handle.error or error
                    self._finish(active)

    def _time_few_rows_product(self) -> bool:
        """Time the next packed product of a few rows (``LlamaStack.time_few_rows_product``), after the engine's
        first work, so neither the start nor the first request waits for it. One product at a time, so a
        request arriving meanwhile waits for one product (at most 0.2 s), not for the whole timing (0.4-0.9 s on
        one thread of a 2-core AMD machine). An idle engine times one whenever it looks; a busy one only between
        two steps and within ``FEW_ROWS_BUSY_SHARE`` of its time, so a room that keeps it busy from the start
        gets the faster products within seconds. Whether the engine was idle."""
        with self._cond:
            if self._closed:
                return False
            idle = not (self._jobs or self._waiting or self._running)
        if not idle and time.monotonic() < self._next_busy_product:
            return False
        started = time.monotonic()
        with self.loaded.lock:
            self.stack.time_few_rows_product()
        self._progress_at = time.monotonic()
        self._next_busy_product = self._progress_at + (self._progress_at - started) * (1 / FEW_ROWS_BUSY_SHARE - 1)
        return idle

    def _run_slice(self, job: _Job) -> None:
        """A plain job whole, or a sliced job up to its next ``yield``; ``job.done`` once it has ended."""
        job.started = True
        try:
            with self.loaded.lock:
                if not job.sliced:
                    job.result = job.work(self.loaded.model)
                else:
                    if job.slices is None:
                        job.slices = job.work(self.loaded.model)
                    next(job.slices)
                    return
        except StopIteration as finished:
            job.result = finished.value
        except Exception as error:  # noqa: BLE001 - handed back to the caller
            job.error = error
        job.done.set()

    def _leave_cancelled(self) -> None:
        with self._cond:
            waiting = [h for h in self._waiting if self._safe_wants_out(h)]
            for handle in waiting:
                self._waiting.remove(handle)
        for handle in waiting:
            self._finish_handle(handle, cancelled=True)
        for active in [a for a in self._running if self._safe_wants_out(a.handle)]:
            self._finish(active, cancelled=True)

    def _safe_wants_out(self, handle: EngineHandle) -> bool:
        try:
            return handle.wants_out()
        except Exception as error:  # noqa: BLE001 - a broken cancel check fails its own request
            handle.error = handle.error or error
            return True

    def _long_kv_need(self, positions: int) -> int:
        """Bytes of the KV cache of its own that a request of ``positions`` needs (0 if a pool slot holds it)."""
        capacity = min(positions, self.stack.max_positions)
        return 0 if capacity <= self.pool.slot_tokens else self.stack.cache_bytes(capacity)

    def _admit(self) -> None:
        while len(self._running) < self.max_batch:
            with self._cond:
                handle = next((h for h in self._waiting if self._fits(h)), None)
                if handle is None:
                    return
                self._waiting.remove(handle)
            try:
                active = self._activate(handle)
                with self._cond:
                    self._running.append(active)
            except Exception as error:  # noqa: BLE001 - e.g. no memory for its cache
                handle.error = error
                self._finish_handle(handle)

    def _fits(self, handle: EngineHandle) -> bool:
        """Whether a request's own KV cache (if it needs one) fits beside those already in use."""
        need = self._long_kv_need(len(handle.request.prompt_ids) + handle.request.max_tokens)
        return need == 0 or self._long_kv_in_use + need <= self.long_kv_bytes

    def _activate(self, handle: EngineHandle) -> _Active:
        prompt = [int(i) for i in handle.request.prompt_ids]
        handle.request.prompt_ids = prompt
        capacity = min(len(prompt) + handle.request.max_tokens, self.stack.max_positions)
        cache = self.pool.acquire(capacity)
        if cache is None:
            cache = self.stack.new_cache(capacity)
            self._long_kv_in_use += self.stack.cache_bytes(capacity)
        length, entry = self.prefix_cache.match(prompt, len(prompt) - 1)
        if entry is not None:
            cache.load_prefix(entry.keys, entry.values, length)
        handle.cached_tokens = length
        handle.phase = "prefill"
        return _Active(handle, cache, list(prompt[:length]), length)

    def _plan(self) -> list[tuple[_Active, Segment]]:
        """This step's work: one token per decoding request, then prompt chunks, shortest first."""
        decoding = sorted((a for a in self._running if not a.prefilling), key=lambda a: a.cache.slot is None)
        plan = [(a, Segment([a.next_token], len(a.fed), a.cache, True)) for a in decoding]
        budget = self.prefill_chunk
        for active in sorted((a for a in self._running if a.prefilling), key=lambda a: len(a.prompt) - a.position):
            if budget <= 0:
                break
            n = min(len(active.prompt) - active.position, budget)
            budget -= n
            chunk = active.prompt[active.position:active.position + n]
            plan.append((active, Segment(chunk, active.position, active.cache, active.position + n == len(active.prompt))))
        return plan

    def _step(self) -> None:
        plan = self._plan()
        threads = self.room_threads if len(plan) > ROOM_REQUESTS else self.threads
        torch.set_num_threads(threads)
        try:
            self._run_step(plan)
        finally:
            torch.set_num_threads(self.threads)  # jobs and the few-row timings between steps keep the configured count

    def _run_step(self, plan: list[tuple[_Active, Segment]]) -> None:
        try:
            with self.loaded.lock:
                started = time.perf_counter()
                for active, _ in plan:
                    if active.handle.started_at is None:
                        self._start(active.handle, started)
                logits = self.stack.forward([segment for _, segment in plan], self.pool).numpy()
        except Exception as error:  # noqa: BLE001 - the step failed as a whole; so do its requests
            for active, _ in plan:
                active.handle.error = error
                self._finish(active)
            return
        ended = time.perf_counter()
        rows = iter(logits)
        prefill_tokens = decode_tokens = generated = 0
        for active, segment in plan:
            if active.prefilling:
                prefill_tokens += len(segment.ids)
                active.position += len(segment.ids)
                active.fed.extend(segment.ids)
                if not active.prefilling:
                    self._prefilled(active, ended)
            else:
                decode_tokens += 1
                active.fed.append(segment.ids[0])
            if segment.wants_logits:
                generated += self._choose(active, next(rows))
        self._record(plan, prefill_tokens, decode_tokens, generated, ended - started)

    def _start(self, handle: EngineHandle, now: float) -> None:
        handle.started_at = now
        handle.waited_seconds = now - handle.submitted_at
        if handle.request.started is not None:
            try:
                handle.request.started(handle.waited_seconds)
            except Exception as error:  # noqa: BLE001 - reported with the request, never kills the engine
                handle.error = error

    def _prefilled(self, active: _Active, now: float) -> None:
        handle = active.handle
        handle.prefill_seconds = now - handle.started_at
        handle.phase = "decode"
        if active.position > handle.cached_tokens:
            self.prefix_cache.store(active.fed, active.cache.keys, active.cache.values)

    def _choose(self, active: _Active, logits: np.ndarray) -> bool:
        """Hand the request its logits; True when its step callable chose a token."""
        handle = active.handle
        try:
            token = handle.request.step(np.array(logits, dtype=np.float32))
        except Exception as error:  # noqa: BLE001 - a failing step callable fails its own request
            handle.error = error
            self._finish(active)
            return False
        if token is not None:
            handle.generated += 1
        if token is None or handle.generated >= handle.request.max_tokens or len(active.fed) >= active.cache.capacity:
            self._finish(active)
        else:
            active.next_token = int(token)
        return token is not None

    def _finish(self, active: _Active, cancelled: bool = False) -> None:
        with self._cond:
            if active in self._running:
                self._running.remove(active)
        if active.handle.error is None and not cancelled and len(active.fed) > len(active.prompt):
            self.prefix_cache.store(active.fed, active.cache.keys, active.cache.values)
        if active.cache.slot is None:
            self._long_kv_in_use -= self.stack.cache_bytes(active.cache.capacity)
        self.pool.release(active.cache)
        seconds = time.perf_counter() - (active.handle.started_at or active.handle.submitted_at)
        self._mean_request_seconds = 0.8 * self._mean_request_seconds + 0.2 * seconds
        self._finish_handle(active.handle, cancelled)

    def _finish_handle(self, handle: EngineHandle, cancelled: bool = False) -> None:
        handle.cancelled = cancelled
        handle.phase = "done"
        handle.done.set()

    def _record(self, plan, prefill_tokens: int, decode_tokens: int, generated: int, seconds: float) -> None:
        ids = tuple(sorted({active.handle.id for active, _ in plan}))
        record = StepRecord(time.time(), len(ids), ids, prefill_tokens, decode_tokens, generated, seconds)
        with self._cond:
            self._steps.append(record)


def _rate(steps: list[StepRecord]) -> float:
    """Tokens generated per second by the whole engine over the last RATE_WINDOW_SECONDS."""
    return recent_rate(steps, time.time())[2]


def recent_rate(steps: list[StepRecord], now: float) -> tuple[int, float, float]:
    """Of the steps that ended in the RATE_WINDOW_SECONDS before ``now``: the tokens generated, the seconds from the
    first one's start to ``now``, and their ratio, the whole engine's tokens per second (0 with no step)."""
    recent = [s for s in steps if s.time >= now - RATE_WINDOW_SECONDS]
    if not recent:
        return 0, 0.0, 0.0
    generated = sum(s.generated_tokens for s in recent)
    span = max(now - (recent[0].time - recent[0].seconds), 1e-6)
    return generated, span, generated / span


def _take_over(loaded) -> None:
    try:
        shared_engine(loaded)
    except BaseException:  # noqa: BLE001 - the next caller sees the same failure, with its message
        _log.exception("no engine could take over")


def _recover(loaded) -> None:
    try:
        _take_over(loaded)
    finally:
        _taking_over.discard(id(loaded))


_taking_over: set[int] = set()


def engine_problem(loaded) -> str | None:
    """Why ``loaded``'s engine cannot serve now (None when it can, or when none was started yet);
    while there is a problem a new engine is being built in the background to take over."""
    entry = _engines.get(id(loaded))  # no lock: it is held while an engine is built, and this must not wait
    if entry is None or entry[0] is not loaded:
        return None
    problem = entry[1].problem()
    if problem is not None and id(loaded) not in _taking_over:
        _taking_over.add(id(loaded))
        threading.Thread(target=_recover, args=(loaded,), name="engine-takeover", daemon=True).start()
    return problem


def build_stack(loaded) -> LlamaStack:
    """``loaded``'s fused model; its packed codes are kept beside the fp32 copy it was read from."""
    copy = verified_copy(loaded)
    with loaded.build_lock:
        if copy is None:
            return LlamaStack(loaded.modules())
        directory, weights_sha256 = copy
        return LlamaStack(loaded.modules(), directory / STORE_FILE, weights_sha256)


_engines: dict[int, tuple[object, Engine]] = {}
_engines_lock = threading.Lock()


def shared_engine(loaded) -> Engine:
    """The one engine of ``loaded``, started on first use; an engine that stopped or is stuck is
    retired (its requests fail with EngineUnavailable) and a new one takes over."""
    with _engines_lock:
        entry = _engines.get(id(loaded))
        if entry is not None and entry[0] is loaded:
            problem = entry[1].problem()
            if problem is None:
                return entry[1]
            entry[1].retire(problem)
            _log.warning("a new engine takes over: %s", problem)
        engine = Engine(loaded)
        _engines[id(loaded)] = (loaded, engine)
        atexit.register(engine.close)
        return engine
