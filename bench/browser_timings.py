"""Page open and control redraw times the browser suite measures (it needs a server and chromium), read back
for `make bench`: one function of rows per group of pages."""

from __future__ import annotations

import json

from bench.browser import SCREENSHOTS

INSTANT_FILE = "instant-generation.json"  # written by tests/browser/test_instant_generation.py
REDRAW_TARGET_MS = 150
OPEN_TARGET_S = 1.0


def generation_kv_streaming_rows() -> list[tuple[str, str, str]]:
    """(name, figure, target) rows for the Generation, KV cache and Streaming pages' replays: median redraw per
    control, page open (to the replay drawn) and the replay's payload, from the last browser-suite run."""
    path = SCREENSHOTS / INSTANT_FILE
    if not path.exists():
        return [("generation / kv-cache / streaming replays", "-", "run tests/browser/test_instant_generation.py")]
    figures = json.loads(path.read_text())
    rows = []
    for page, median in figures["redraw_median_ms"].items():
        steps = len(figures["redraw_ms"][page])
        rows.append((f"{page}: control -> figure redrawn (ms, median of {steps})", f"{median:.1f}",
                     f"<= {REDRAW_TARGET_MS} ms, no script run"))
    for page, seconds in figures["opens_s"].items():
        rows.append((f"{page}: open, warm prompt -> replay drawn (s)", f"{seconds:.2f}", f"<= {OPEN_TARGET_S:.0f} s"))
        rows.append((f"  {page}: script run finished (s)", f"{figures['idle_s'][page]:.2f}", ""))
    for page, size in figures["payload_bytes"].items():
        rows.append((f"{page}: replay payload (JSON characters)", f"{size:,}", ""))
    return rows
