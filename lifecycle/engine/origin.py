"""Who is asking: the label and id the engine shows for a request, set by the caller's context.

``generate_steps`` keeps its signature, so callers that want their requests named (the API names
each with its call id) wrap the call in ``with origin("api", call_id, started=...)``; the
context variable travels with the worker thread that runs the generation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Origin:
    label: str = "page"
    tag: str | None = None
    started: Callable[[float], None] | None = None  # called with the seconds waited when prefill starts
    bounded: bool = False  # refused (EngineFull) when the engine's waiting queue is full, as API calls are


_current: ContextVar[Origin] = ContextVar("engine_origin", default=Origin())


def current_origin() -> Origin:
    return _current.get()


@contextmanager
def origin(label: str, tag: str | None = None, started: Callable[[float], None] | None = None,
           bounded: bool = False) -> Iterator[Origin]:
    """Name the engine requests made inside this block (``bounded``: refused when the queue is full)."""
    token = _current.set(Origin(label, tag, started, bounded))
    try:
        yield _current.get()
    finally:
        _current.reset(token)
