"""Results kept in memory for everyone who asks, bounded in bytes and computed once per key.

A workshop of thirty people asks for the same few results at the same moment, and for thirty
different ones a minute later. ``ResultCache`` serves both:

- one computation per key: whoever asks first computes, everyone asking meanwhile waits for that
  same computation (``Pending``), and later askers get the kept result;
- a memory budget in bytes (``LIFECYCLE_CACHE_MB``), not a count of entries: a 1,000-token prompt's
  attention maps weigh a hundred times a short one's. Least recently used results go first; a
  result still being computed is never dropped;
- a failed computation is not kept: its waiters see the error and the next asker tries again.

A computation receives ``report``, a callable that publishes partial progress (the tokens of a
generation so far) to everyone holding its ``Pending``.

Nothing here waits or grows without bound: background computations run on a pool of at most
``LIFECYCLE_RESULT_THREADS`` threads, and nobody waits for a result longer than
``LIFECYCLE_RESULT_WAIT_SECONDS`` after its computation began (``ResultTimeout``; the key is then
free for the next asker to compute again), so one computation that hangs holds up only its own key.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from lifecycle.errors import LifecycleError

BUDGET_ENV = "LIFECYCLE_CACHE_MB"
DEFAULT_BUDGET_MB = 512
THREADS_ENV = "LIFECYCLE_RESULT_THREADS"
DEFAULT_THREADS = 128
WAIT_ENV = "LIFECYCLE_RESULT_WAIT_SECONDS"
DEFAULT_WAIT_SECONDS = 900.0

Value = TypeVar("Value")
Compute = Callable[[Callable[[Any], None]], Value]


def _env_number(name: str, default: float, environ: Mapping[str, str] = os.environ) -> float:
    raw = environ.get(name, "").strip()
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = -1.0
    if not value > 0:  # also catches NaN
        raise LifecycleError(f"{name} must be a number > 0, got {raw[:40]!r}", param=name)
    return value


def budget_bytes(environ: Mapping[str, str] = os.environ) -> int:
    """The cache budget from ``LIFECYCLE_CACHE_MB`` (megabytes, default 512)."""
    raw = environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return DEFAULT_BUDGET_MB * 2**20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = -1.0
    if not megabytes >= 0:  # also catches NaN
        raise LifecycleError(f"{BUDGET_ENV} must be a number of megabytes >= 0, got {raw[:40]!r}", param=BUDGET_ENV)
    return int(megabytes * 2**20)


def approximate_bytes(value: object) -> int:
    """Memory held by ``value``: numpy buffers by their size, containers and dataclasses walked through."""
    seen: set[int] = set()
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen or item is None or isinstance(item, (bool, int, float, type)) or callable(item):
            continue
        seen.add(id(item))
        if isinstance(item, np.ndarray):
            total += item.nbytes + 112
        elif isinstance(item, (str, bytes, bytearray)):
            total += sys.getsizeof(item)
        elif isinstance(item, Mapping):
            total += sys.getsizeof(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += sys.getsizeof(item)
            stack.extend(item)
        elif is_dataclass(item):
            total += sys.getsizeof(item)
            stack.extend(getattr(item, f.name) for f in fields(item))
        elif hasattr(item, "__dict__"):
            total += sys.getsizeof(item)
            stack.extend(vars(item).values())
        else:
            total += sys.getsizeof(item)
    return total


class ResultTimeout(TimeoutError):
    """A result was not ready within its deadline; the message says how long it was waited for."""


class Pending(Future, Generic[Value]):
    """One computation, shared by everyone who asked for its key; ``progress`` grows while it runs.
    ``result()`` waits at most until ``deadline`` (monotonic seconds), then raises ResultTimeout."""

    def __init__(self, wait_seconds: float = DEFAULT_WAIT_SECONDS) -> None:
        super().__init__()
        self.progress: list = []
        self.started = time.monotonic()
        self.deadline = self.started + wait_seconds

    def result(self, timeout: float | None = None) -> Value:
        limit = max(0.0, self.deadline - time.monotonic()) if timeout is None else timeout
        try:
            return super().result(limit)
        except FutureTimeout:
            raise ResultTimeout(f"This result was not ready after {time.monotonic() - self.started:,.0f} s "
                                "(LIFECYCLE_RESULT_WAIT_SECONDS): the server is overloaded or stuck; "
                                "reload the page to try again.") from None

    @property
    def overdue(self) -> bool:
        return not self.done() and time.monotonic() > self.deadline


@dataclass
class _Entry:
    pending: Pending
    size: int = 0


class ResultCache:
    """Keyed results, computed once for all askers, kept while they fit ``budget`` bytes."""

    def __init__(self, budget: int | None = None, threads: int | None = None, wait_seconds: float | None = None) -> None:
        self.budget = budget_bytes() if budget is None else budget
        self.wait_seconds = _env_number(WAIT_ENV, DEFAULT_WAIT_SECONDS) if wait_seconds is None else wait_seconds
        workers = int(_env_number(THREADS_ENV, DEFAULT_THREADS)) if threads is None else threads
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="result")
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.computations: Counter = Counter()  # per kind (the key's first item): how many ran
        self.hits: Counter = Counter()
        self.evictions = 0

    def get(self, key: Hashable, compute: Compute) -> Value:
        """The result for ``key``, computed here by the first asker (others wait for it, at most
        until its deadline: then ResultTimeout, and the key is free to be computed again)."""
        pending, owner = self._claim(key)
        if owner:
            self._run(key, pending, compute)
        try:
            return pending.result()
        except ResultTimeout:
            self._forget(key, pending)
            raise

    def start(self, key: Hashable, compute: Compute) -> Pending:
        """The computation for ``key``, started on the pool by the first asker; returns at once."""
        pending, owner = self._claim(key)
        if owner:
            self._pool.submit(self._run, key, pending, compute)
        return pending

    def peek(self, key: Hashable) -> Pending | None:
        """The computation for ``key`` if anyone started it (finished or not), without starting one."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry.pending if entry else None

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return sum(entry.size for entry in self._entries.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _claim(self, key: Hashable) -> tuple[Pending, bool]:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.pending.overdue:  # hung: the next asker computes it again
                del self._entries[key]
                entry = None
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits[_kind(key)] += 1
                return entry.pending, False
            pending = Pending(self.wait_seconds)
            self._entries[key] = _Entry(pending)
            self.computations[_kind(key)] += 1
            return pending, True

    def _forget(self, key: Hashable, pending: Pending) -> None:
        with self._lock:
            if self._entries.get(key) is not None and self._entries[key].pending is pending:
                del self._entries[key]

    def _run(self, key: Hashable, pending: Pending, compute: Compute) -> None:
        try:
            value = compute(pending.progress.append)
        except BaseException as error:  # noqa: BLE001 - every waiter must be released, whatever happened
            self._forget(key, pending)
            pending.set_exception(error)
            return
        size = approximate_bytes(value)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.pending is pending:
                entry.size = size
            self._evict(keep=key)
        pending.set_result(value)

    def _evict(self, keep: Hashable) -> None:
        """Drop least recently used finished results until the rest fit the budget (lock held)."""
        used = sum(entry.size for entry in self._entries.values())
        for key in list(self._entries):
            if used <= self.budget:
                return
            entry = self._entries[key]
            if key == keep or not entry.pending.done():
                continue
            used -= entry.size
            del self._entries[key]
            self.evictions += 1


def _kind(key: Hashable) -> str:
    return str(key[0]) if isinstance(key, tuple) and key else type(key).__name__


_shared: ResultCache | None = None
_shared_lock = threading.Lock()


def shared_cache() -> ResultCache:
    """The process-wide cache every page, session and the warm endpoint share (budget read once)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ResultCache()
        return _shared
