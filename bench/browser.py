"""Figures the browser suite measures (it needs a server and chromium), read back for `make bench`."""

from __future__ import annotations

import json
from pathlib import Path

SLIDER_LATENCY_FILE = "slider-latency.json"
SCREENSHOTS = Path(__file__).resolve().parents[1] / "tests" / "browser" / "screenshots"
SLIDER_TARGET_MS = 150


def slider_latency() -> dict | None:
    """The last browser-suite measurement of a Sampling slider step to its chart redrawn (None: not run yet)."""
    path = SCREENSHOTS / SLIDER_LATENCY_FILE
    return json.loads(path.read_text()) if path.exists() else None
