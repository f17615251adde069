"""Page timings measured in a real browser against a running app, for ``make bench``.

These functions start nothing: they are given the app's base URL and a Playwright browser (Debian's
chromium, launched once by bench/__main__.py as tests/browser/conftest.py launches it), and return
``(name, figure, target)`` rows.
"""

from __future__ import annotations

import time
from statistics import median

from ui.stages import HOME, STAGES

OPEN_TARGET_S = 1.0
OPEN_REPEATS = 3
VIEWPORT = {"width": 1366, "height": 768}
TIMEOUT_MS = 600_000  # the warming visit of a fresh server waits for the model and the prompt's results
# The script run has finished (the h1 is only there once the page's script started), the page's main
# visual is in the main area and every Plotly chart has drawn its SVG (plotly.js arrives after the script).
_OPENED = """(visual) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]');
  return app && main && main.querySelector('[data-testid="stMainBlockContainer"] h1')
    && app.dataset.testScriptState === 'notRunning' && main.querySelector(visual)
    && [...main.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'));
}"""


def open_seconds(page, url: str, visual: str) -> float:
    """Seconds from navigating to ``url`` to its script run finished and ``visual`` (a CSS selector) drawn."""
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_function(_OPENED, arg=visual, polling=20)
    return time.perf_counter() - started


def page_open_rows(app_url: str, browser, repeats: int = OPEN_REPEATS) -> list[tuple[str, str, str]]:
    """Every page's open time for a warm prompt (the default one, opened once before): the median of
    ``repeats`` visits, each in a new tab (a new Streamlit session) of one browser whose cache holds the
    app's scripts, as a returning visitor's does. The page is open when its main visual is drawn."""
    from tests.browser.test_legibility import CHART, MAIN_VISUAL

    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    rows = []
    try:
        for stage in (HOME, *STAGES):
            times = []
            for visit in range(repeats + 1):  # the first visit warms the prompt's results
                page = context.new_page()
                try:
                    seconds = open_seconds(page, f"{app_url}/{stage.url_path}",
                                           MAIN_VISUAL.get(stage.url_path, CHART))
                finally:
                    page.close()
                if visit:
                    times.append(seconds)
            rows.append((f"open {stage.title}, warm prompt (s, median of {repeats})", f"{median(times):.2f}",
                         f"<= {OPEN_TARGET_S:g} s"))
    finally:
        context.close()
    return rows
