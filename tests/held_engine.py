"""A page job holding the engine for a block's length: what a busy engine looks like to /health and the pages."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def engine_held(engine) -> Iterator[None]:
    """Inside the block a job holds ``engine`` (its model); it ends when the block does."""
    started, release = threading.Event(), threading.Event()

    def hold(model):
        started.set()
        release.wait(120)

    holder = threading.Thread(target=engine.run, args=(hold,))
    holder.start()
    try:
        assert started.wait(60), "the engine never ran the holding job"
        yield
    finally:
        release.set()
        holder.join(60)
