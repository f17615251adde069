"""Figures the browser suite measures (it needs a server and chromium), read back for `make bench`."""

from __future__ import annotations

import json
from pathlib import Path

SLIDER_LATENCY_FILE = "slider-latency.json"
SCREENSHOTS = Path(__file__).resolve().parents[1] / "tests" / "browser" / "screenshots"
SLIDER_TARGET_MS = 150


def slider_latency() -> dict | None:
    """The last browser-suite measurement of a step of the Sampling page's live temperature slider to its
    chart redrawn in the browser (None: not run yet)."""
    path = SCREENSHOTS / SLIDER_LATENCY_FILE
    return json.loads(path.read_text()) if path.exists() else None


def slider_rows() -> list[tuple[str, str, str, str]]:
    """(name, measured, target, verdict) rows for ``bench``'s table, from the last browser-suite run."""
    from bench.report import check

    latency = slider_latency()
    target = f"<= {SLIDER_TARGET_MS} ms"
    if latency is None:
        return [("slider step -> chart redrawn (ms, browser)", "-", target, "run tests/browser/test_sampling_slider.py")]
    rows = [
        (f"slider step -> chart redrawn (ms, median of {latency['steps']})", f"{latency['median_ms']:.1f}", target,
         check(latency["median_ms"] <= SLIDER_TARGET_MS)),
        ("  fastest / slowest step (ms)", f"{latency['min_ms']:.0f} / {latency['max_ms']:.0f}", "", ""),
    ]
    if "transform_median_ms" in latency:
        rows.append(("  in-browser transform + SVG update (ms, median)", f"{latency['transform_median_ms']:.2f}", "", ""))
    return rows
