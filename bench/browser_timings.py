"""Page timings in a real browser, for ``make bench``.

``page_open_rows`` measures every page's open time itself: it is given the app's base URL and a Playwright
browser (Debian's chromium, launched once by bench/__main__.py as tests/browser/conftest.py launches it), each
visit a new tab (a new session, plotly.js run again). ``page_switch_rows`` times the same pages reached from
inside one session, by a sidebar link, as a visitor walks the journey; ``forward_tab_rows`` the Forward
pass page's step tabs (when all are built after a switch, and a tab click to its charts shown). The other
functions read back what the browser suite's instant-control tests wrote under tests/browser/screenshots/
("-" and the test to run when it has not run yet); ``measure_instant_controls`` runs those tests alone first,
so the figures come from this bench's run on a quiet machine, not from a suite's run under load. Each returns
``(name, figure, target)`` rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

from bench.browser import SCREENSHOTS
from tests.browser.app_page import DETAILS_KEYS, DETAILS_WAITING
from ui.stages import HOME, STAGES

OPEN_TARGET_S = 1.0
REDRAW_TARGET_MS = 150
# Five new tabs a page: a new tab's time moves by ~0.05 s from one to the next on this machine, and a median of three
# moved a page across the 1 s line from one run to the next (Take it home: 0.96, then 1.02).
OPEN_REPEATS = 5
INSTANT_CONTROLS_FILE = "instant-controls.json"  # tests/browser/test_instant_controls.py
INSTANT_FILE = "instant-generation.json"  # tests/browser/test_instant_generation.py
INSTANT_FRAGMENTS_FILE = "instant-fragments.json"  # tests/browser/test_instant_controls.py, the fragments
VIEWPORT = {"width": 1366, "height": 768}
TIMEOUT_MS = 600_000  # the warming visit of a fresh server waits for the model and the prompt's results
# The page's picture: its main visual is in the main area, drawn (a Plotly chart has its SVG).
_PICTURE = """(visual) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const shown = main && main.querySelector(visual);
  return shown && (shown.dataset.testid !== 'stPlotlyChart' || shown.querySelector('.main-svg'));
}"""
# Everything: the script run has finished (the h1 is only there once the page's script started), the main visual
# is drawn, every Plotly chart has drawn its SVG and no page's details still wait for their run
# (ui.when_idle.details_ready). plotly.js is a 4.7 MB chunk Streamlit loads only once a page holds a chart; until
# it has run, each chart (and any other element whose code is still loading) is a skeleton without the
# stPlotlyChart test id, so "no skeleton left" is part of drawn.
_DRAWN = """
    && main.querySelector(visual) && !main.querySelector('[data-testid="stSkeleton"]')
    && [...main.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'))
    && !(""" + DETAILS_WAITING + """)(keys)"""
_OPENED = """([visual, keys]) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]');
  return app && main && main.querySelector('[data-testid="stMainBlockContainer"] h1')
    && app.dataset.testScriptState === 'notRunning'""" + _DRAWN + """;
}"""
# The same after a page switch inside one session: the h1 is the new page's and no element of the page
# left is still on screen (Streamlit marks those stale until the new page's run has replaced them).
_SWITCHED = """([visual, title, keys]) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const main = document.querySelector('[data-testid="stMain"]');
  const h1 = main && main.querySelector('[data-testid="stMainBlockContainer"] h1');
  return app && h1 && h1.innerText.trim() === title && app.dataset.testScriptState === 'notRunning'
    && !main.querySelector('[data-stale="true"]')""" + _DRAWN + """;
}"""


# The picture after a page switch: the new page's h1, and its main visual drawn in an element of the new run.
_SWITCHED_PICTURE = """([visual, title]) => {
  const main = document.querySelector('[data-testid="stMain"]');
  const h1 = main && main.querySelector('[data-testid="stMainBlockContainer"] h1');
  const shown = h1 && h1.innerText.trim() === title && main.querySelector(visual);
  return shown && !shown.closest('[data-stale="true"]')
    && (shown.dataset.testid !== 'stPlotlyChart' || shown.querySelector('.main-svg'));
}"""


# A new tab opened at a page's own address first asks /<page>/_stcore/health (and host-config) as if the app were served
# under that path; the 404 costs Streamlit's frontend a 100 ms wait before it asks / (streamlit/streamlit#7074, open).
# The time from the first ask to the second, in ms.
_BASE_PATH_PROBE_MS = """() => {
  const asks = performance.getEntriesByType('resource').filter(r => r.name.endsWith('/_stcore/health'));
  return asks.length > 1 ? asks[1].startTime - asks[0].startTime : 0;
}"""


def open_seconds(page, url: str, visual: str) -> float:
    """Seconds from navigating to ``url`` to its script run finished and ``visual`` (a CSS selector) drawn, with
    everything else on the page."""
    return open_times(page, url, visual)[1]


def open_times(page, url: str, visual: str) -> tuple[float, float]:
    """Seconds from navigating to ``url`` to its picture (``visual``, a CSS selector) drawn, and to everything drawn."""
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_function(_PICTURE, arg=visual, polling=20)
    picture = time.perf_counter() - started
    page.wait_for_function(_OPENED, arg=[visual, DETAILS_KEYS], polling=20)
    return picture, time.perf_counter() - started


def page_open_rows(app_url: str, browser, repeats: int = OPEN_REPEATS) -> list[tuple[str, str, str]]:
    """Every page's open time for a warm prompt (the default one, opened once before): the median of
    ``repeats`` visits, each in a new tab (a new Streamlit session) of one browser whose cache holds the
    app's scripts, as a returning visitor's does. The page is open when its picture (its main visual) is drawn;
    the row under it is the time to everything on the page drawn. The last row: how long Streamlit's probe of a
    page's own path (_BASE_PATH_PROBE_MS) held its deep links, inside those times (none, since ui/deep_links.py)."""
    from tests.browser.test_legibility import CHART, MAIN_VISUAL

    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    rows, probes = [], []
    try:
        for stage in (HOME, *STAGES):
            def visit(stage=stage) -> tuple[float, float]:
                page = context.new_page()
                try:
                    times = open_times(page, f"{app_url}/{stage.url_path}", MAIN_VISUAL.get(stage.url_path, CHART))
                    if stage.url_path:
                        probes.append(page.evaluate(_BASE_PATH_PROBE_MS))
                    return times
                finally:
                    page.close()

            rows += _picture_rows(f"open {stage.title}", visit, repeats)
    finally:
        context.close()
    return [*rows, ("deep links: wait for the base-path probe (ms, median)", f"{median(probes):.0f}", "<= 0 ms")]


def _picture_rows(name: str, measure, repeats: int) -> list[tuple[str, str, str]]:
    """``measure()`` (seconds to the picture, to everything drawn) run ``repeats`` + 1 times, the first only
    warming the prompt's results: the picture's median row, against the target, and everything's under it."""
    measure()
    times = [measure() for _ in range(repeats)]
    return [(f"{name}: picture, warm prompt (s, median of {repeats})", f"{median(t[0] for t in times):.2f}",
             f"<= {OPEN_TARGET_S:g} s"),
            ("  everything on the page drawn (s)", f"{median(t[1] for t in times):.2f}", "")]


def _warm_median_row(name: str, measure, repeats: int) -> tuple[str, str, str]:
    """``measure()`` run ``repeats`` + 1 times, the first only warming the prompt's results: its median row."""
    measure()
    times = [measure() for _ in range(repeats)]
    return f"{name}, warm prompt (s, median of {repeats})", f"{median(times):.2f}", f"<= {OPEN_TARGET_S:g} s"


def page_switch_rows(app_url: str, browser, repeats: int = OPEN_REPEATS) -> list[tuple[str, str, str]]:
    """Every page's open time when reached from inside the app (a sidebar link, as the Next and Back links
    and the journey map do): one session, already showing the journey map (the Request page for the map
    itself), clicks the page's link; the median of ``repeats`` switches after one that warms the prompt. No
    new session, and plotly.js has already run in this tab: what stays is the page's script run and drawing.
    As for a new tab, the picture drawn is the row with the target, everything drawn the row under it."""
    from tests.browser.test_legibility import CHART, MAIN_VISUAL
    from ui.frame import APP_TITLE

    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()

    def switch(stage) -> tuple[float, float]:
        nav = page.get_by_test_id("stSidebarNav")
        link = nav.locator(f'a[href$="/{stage.url_path}"]') if stage.url_path else nav.locator("a").first
        visual, title = MAIN_VISUAL.get(stage.url_path, CHART), APP_TITLE if stage is HOME else stage.title
        started = time.perf_counter()
        link.click()
        page.wait_for_function(_SWITCHED_PICTURE, arg=[visual, title], polling=20)
        picture = time.perf_counter() - started
        page.wait_for_function(_SWITCHED, arg=[visual, title, DETAILS_KEYS], polling=20)
        return picture, time.perf_counter() - started

    rows = []
    try:
        open_seconds(page, f"{app_url}/{STAGES[0].url_path}", MAIN_VISUAL.get(STAGES[0].url_path, CHART))
        for stage in (HOME, *STAGES):
            def away_and_back(stage=stage) -> tuple[float, float]:
                switch(STAGES[0] if stage is HOME else HOME)
                return switch(stage)

            rows += _picture_rows(f"switch to {stage.title}", away_and_back, repeats)
    finally:
        context.close()
    return rows


# The Forward pass page's step tabs (views/forward_pass.py): its first run builds none (the live block alone), its
# second (once the browser has drawn that and is idle, ui/when_idle.py) every tab. Filled: the script idle and every
# tab panel holding its drawn charts, none still saying it is coming.
STEPS_FILLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const panels = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stTabPanel"]')];
  return app.dataset.testScriptState === 'notRunning' && panels.length > 1
    && panels.every(p => !p.innerText.includes('Drawing this step')
                         && [...p.querySelectorAll('[data-testid="stPlotlyChart"]')].length > 0
                         && [...p.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg')));
}"""
# Resolves with the ms from the next click to the first animation frame in which tab panel ``index`` is shown
# with every chart in it drawn, nothing stale and the script idle (the browser's own clock, as the live
# controls' redraws are timed: not Playwright's round trips).
TAB_SHOWN = """(index) => new Promise(resolve => {
  const app = document.querySelector('[data-testid="stApp"]');
  let clicked = null;
  document.addEventListener('click', () => { clicked = performance.now(); }, {capture: true, once: true});
  const look = () => {
    const panel = document.querySelectorAll('[data-testid="stMain"] [data-testid="stTabPanel"]')[index];
    const charts = panel ? [...panel.querySelectorAll('[data-testid="stPlotlyChart"]')] : [];
    if (clicked !== null && panel && panel.offsetParent !== null && !panel.hidden
        && app.dataset.testScriptState === 'notRunning' && !document.querySelector('[data-stale="true"]')
        && charts.length > 0 && charts.every(c => c.querySelector('.main-svg')))
      resolve(performance.now() - clicked);
    else requestAnimationFrame(look);
  };
  requestAnimationFrame(look);
})"""


def click_tab(page, index: int) -> tuple[float, float]:
    """Click the Forward pass page's step tab ``index``: (ms in the browser from the click to the tab's charts
    shown, ms of Playwright's wall clock from before the click to its answer)."""
    page.evaluate(f"() => {{ window.tabShown = ({TAB_SHOWN})({index}); }}")
    started = time.perf_counter()
    page.get_by_test_id("stMain").get_by_test_id("stTab").nth(index).click()
    in_browser = page.evaluate("() => window.tabShown")
    return in_browser, (time.perf_counter() - started) * 1000


def forward_tab_rows(app_url: str, browser, repeats: int = OPEN_REPEATS) -> list[tuple[str, str, str]]:
    """The Forward pass page's step tabs, in one session as page_switch_rows has it: after a switch to the
    page, when every tab is built (the switch is timed by page_switch_rows: the live block drawn); then, with
    every tab built, a click on each tab in turn, ``repeats`` rounds after one that warms."""
    from tests.browser.test_legibility import CHART, MAIN_VISUAL
    from ui.frame import APP_TITLE
    from ui.stages import stage

    forward = stage("forward-pass")
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()

    def switch(to) -> None:
        nav = page.get_by_test_id("stSidebarNav")
        (nav.locator(f'a[href$="/{to.url_path}"]') if to.url_path else nav.locator("a").first).click()
        page.wait_for_function(_SWITCHED, arg=[MAIN_VISUAL.get(to.url_path, CHART),
                                               APP_TITLE if to is HOME else to.title, DETAILS_KEYS], polling=20)

    def filled() -> float:
        switch(HOME)
        started = time.perf_counter()
        switch(forward)
        page.wait_for_function(STEPS_FILLED, polling=20)
        return time.perf_counter() - started

    try:
        open_seconds(page, f"{app_url}/{STAGES[0].url_path}", MAIN_VISUAL.get(STAGES[0].url_path, CHART))
        name, figure, _ = _warm_median_row("switch to Forward pass -> every step tab built", filled, repeats)
        rows = [(name, figure, "")]  # the page is open before this (its live block drawn): page_switch_rows
        tabs = page.get_by_test_id("stMain").get_by_test_id("stTab").count()
        order = [*range(1, tabs), 0]
        in_browser, wall = [], []
        for round_ in range(repeats + 1):
            for index in order:
                shown, seen = click_tab(page, index)
                if round_:
                    in_browser.append(shown)
                    wall.append(seen)
                page.wait_for_timeout(150)
        rows += [(f"Forward pass tab click -> its charts shown (ms, median of {len(in_browser)})",
                  f"{median(in_browser):.1f}", f"<= {REDRAW_TARGET_MS} ms"),
                 ("  the same, Playwright's click to seen (ms, median)", f"{median(wall):.0f}", "")]
    finally:
        context.close()
    return rows


def browser_control_rows() -> list[tuple[str, str, str]]:
    """The controls redrawn in the browser (Attention, Forward pass, Next token's scale, the Embeddings strip's
    slider): each one's median redraw and what those pages send their live figure (open times are
    page_open_rows')."""
    path = SCREENSHOTS / INSTANT_CONTROLS_FILE
    if not path.exists():
        return [("controls redrawn in the browser", "-", "run tests/browser/test_instant_controls.py")]
    measured = json.loads(path.read_text())
    rows = [(f"{name} step -> figure redrawn (ms, median of {figure['steps']})", f"{figure['median_ms']:.1f}",
             f"<= {REDRAW_TARGET_MS} ms") for name, figure in measured["controls"].items()]
    rows += [(f"{url_path} live figure's data (KiB, the test's prompt)", f"{kib:,.1f}", "")
             for url_path, kib in measured["payload_kib"].items()]
    return rows


INSTANT_TESTS = ("tests/browser/test_instant_controls.py", "tests/browser/test_instant_generation.py")


def measure_instant_controls() -> None:
    """Run the browser tests that time every control and write the files the rows below read: alone, one
    worker, against ``streamlit run app.py`` as the README starts it (the tests' own server)."""
    root = Path(__file__).resolve().parents[1]
    for name in (INSTANT_CONTROLS_FILE, INSTANT_FILE, INSTANT_FRAGMENTS_FILE):
        (SCREENSHOTS / name).unlink(missing_ok=True)  # a failed run must not leave an older run's figures
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                          "-n", "0", *INSTANT_TESTS], cwd=root, capture_output=True, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    if run.returncode != 0:
        print(run.stdout[-3000:], run.stderr[-2000:], sep="\n")


def fragment_rows() -> list[tuple[str, str, str]]:
    """The controls that rerun only their own fragment (the Embeddings page's word list, the Context window page's
    window and truncation demo): the median from the control to the run's end, from the last browser-suite run."""
    path = SCREENSHOTS / INSTANT_FRAGMENTS_FILE
    if not path.exists():
        return [("fragment controls", "-", "run tests/browser/test_instant_controls.py")]
    measured = json.loads(path.read_text())
    return [(f"{name} -> fragment rerun (ms, median of {figure['steps']})", f"{figure['median_ms']:.1f}",
             f"<= {REDRAW_TARGET_MS} ms") for name, figure in measured.items() if name != "measures"]


def generation_kv_streaming_rows() -> list[tuple[str, str, str]]:
    """(name, figure, target) rows for the Generation, KV cache and Streaming pages' replays: median redraw per
    control and the replay's payload, from the last browser-suite run (their open times are page_open_rows')."""
    path = SCREENSHOTS / INSTANT_FILE
    if not path.exists():
        return [("generation / kv-cache / streaming replays", "-", "run tests/browser/test_instant_generation.py")]
    figures = json.loads(path.read_text())
    rows = []
    for page, middle in figures["redraw_median_ms"].items():
        steps = len(figures["redraw_ms"][page])
        rows.append((f"{page}: control -> figure redrawn (ms, median of {steps})", f"{middle:.1f}",
                     f"<= {REDRAW_TARGET_MS} ms, no script run"))
    for page, size in figures["payload_bytes"].items():
        rows.append((f"{page}: replay payload (JSON characters)", f"{size:,}", ""))
    return rows
