"""Redraw and page-open figures the browser suite measures on the stage pages, read back for `make bench`.

Each function returns (name, figure, target) rows from the JSON a browser test wrote under
tests/browser/screenshots/ ("-" and the test to run when it has not run yet).
"""

from __future__ import annotations

import json

from bench.browser import SCREENSHOTS

INSTANT_CONTROLS_FILE = "instant-controls.json"  # tests/browser/test_instant_controls.py
REDRAW_TARGET_MS = 150
OPEN_TARGET_S = 1.0


def attention_forward_rows() -> list[tuple[str, str, str]]:
    """The Attention and Forward pass pages: each control's median redraw in the browser, each page's open
    time for a prompt already computed, and what each page sends its live figure."""
    path = SCREENSHOTS / INSTANT_CONTROLS_FILE
    if not path.exists():
        return [("Attention / Forward pass controls and opens", "-", "run tests/browser/test_instant_controls.py")]
    measured = json.loads(path.read_text())
    rows = [(f"{name} step -> figure redrawn (ms, median of {figure['steps']})", f"{figure['median_ms']:.1f}",
             f"<= {REDRAW_TARGET_MS} ms") for name, figure in measured["controls"].items()]
    rows += [(f"{url_path} opens, prompt computed (s, median)", f"{seconds:.2f}", f"<= {OPEN_TARGET_S:.0f} s")
             for url_path, seconds in measured["open_s"].items()]
    rows += [(f"{url_path} live figure's data (KiB, default prompt)", f"{kib:,.1f}", "")
             for url_path, kib in measured["payload_kib"].items()]
    return rows
