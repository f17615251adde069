"""Waiting until the shared engine holds nothing: no request in its batch or waiting, no page job."""

from __future__ import annotations

import time


def until_idle(engine, seconds: float) -> None:
    """Return once ``engine.load()`` is all zero; fail after ``seconds``, saying what the engine still holds."""
    deadline = time.monotonic() + seconds
    while any(engine.load().values()):
        assert time.monotonic() < deadline, f"the engine still holds {engine.load()}"
        time.sleep(0.01)
