"""Helpers to open and read pages of the running app in Playwright."""

from __future__ import annotations

import json
import os
import urllib.request
from urllib.parse import urlencode, urlsplit

from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.browser.conftest import PAGE_TIMEOUT_MS
from tests.details import details_keys
from views import forward_pass

EXCEPTION = '[data-testid="stException"]'
# A wait on a condition in the page looks every POLL_MS, not at every animation frame (Playwright's default for
# wait_for_function): looking frame by frame keeps chromium drawing frames for as long as the wait lasts (measured
# on a drawn page: 0.06-0.13 s of chromium's CPU per second of waiting, against 0.002-0.004 s looking every 100 ms).
POLL_MS = 50
IDLE_APP = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# Every Plotly chart has drawn its SVG (the script can be idle while the browser still draws). Until plotly.js
# (a 4.7 MB chunk loaded once a page holds a chart) has run, a chart is a skeleton without the stPlotlyChart
# test id: no skeleton may be left, or a page whose charts are still loading would count as drawn.
CHARTS_DRAWN = (
    "() => !document.querySelector('[data-testid=\"stSkeleton\"]')"
    " && [...document.querySelectorAll('[data-testid=\"stPlotlyChart\"]')]"
    ".every(chart => chart.querySelector('.main-svg'))"
)
# A page whose details wait for its picture to be drawn (ui.when_idle.details_ready, and the Forward pass page's
# step tabs: the component's element carries the key's class) holds them back until the component has been drawn
# again, told (data-settled).
DETAILS_KEYS = [*details_keys(), forward_pass.FILL_KEY]
DETAILS_WAITING = """(keys) => keys.some(key => [...document.querySelectorAll(`.st-key-${key}`)]
    .some(element => !element.querySelector('.when-idle[data-settled]')))"""
# What the page holds when its details are late: each waiting component's state (asked, told at which browser time,
# settled), the script's state, charts not drawn and skeletons (the component tells only once every chart is drawn).
DETAILS_STATE = """(keys) => ({
    now: Math.round(performance.now()),
    script: document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state'),
    components: keys.flatMap(key => [...document.querySelectorAll(`.st-key-${key}`)].map(element => {
        const idle = element.querySelector('.when-idle');
        return {key, mounted: Boolean(idle), ...(idle ? {...idle.dataset} : {})};
    })),
    skeletons: document.querySelectorAll('[data-testid="stSkeleton"]').length,
    charts: document.querySelectorAll('[data-testid="stPlotlyChart"]').length,
    undrawn: [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].filter(c => !c.querySelector('.main-svg'))
        .length,
    exceptions: document.querySelectorAll('[data-testid="stException"]').length,
})"""
SETTLE_MS = 300  # the layout counts as settled once nothing in it moved for this long
# A widget bound to the URL may start one more run right after the first (seen after a sidebar click): the
# page counts as idle once its script state has stayed "notRunning" this long, a follow-up run included
# (or after IDLE_AT_MOST_MS of runs: Live calls' engine panel reruns itself every second).
IDLE_FOR_MS = 200
IDLE_AT_MOST_MS = 10_000
# A page's runs may do its own work: the Agents page's loop, then in the run that builds its details its injection
# measurement and temperature-0 roads (a fresh `make run` server, quiet machine: everything drawn after 46 s), past
# 90 s (the context's timeout) when three test workers and chromium share the two cores with the app server (a
# presenter walk failed so). Waiting longer for a run to end costs a passing test nothing; how fast pages are is
# `make bench`'s to say.
RUN_TIMEOUT_MS = 240_000
IDLE_FOR = """([ms, atMostMs]) => new Promise(resolve => {
    const app = document.querySelector('[data-testid="stApp"]');
    let timer = null;
    const done = () => { observer.disconnect(); clearTimeout(timer); clearTimeout(cap); resolve(true); };
    const observer = new MutationObserver(() => arm());
    const arm = () => {
        clearTimeout(timer);
        if (app.getAttribute('data-test-script-state') === 'notRunning') timer = setTimeout(done, ms);
    };
    const cap = setTimeout(done, atMostMs);
    observer.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
    arm();
})"""
STILL_AT_MOST_MS = 10_000  # a page that redraws itself all the time (Live calls' engine panel) is shot anyway
# Resolves once the page's height and width, and every chart's drawn size, stayed the same for SETTLE_MS
# (looked at every 100 ms), or after STILL_AT_MOST_MS: after a resize the frontend re-lays out every
# element and Plotly redraws.
LAYOUT_STILL = """([settleMs, atMostMs]) => new Promise(resolve => {
    const start = performance.now();
    let last = null, since = start;
    const look = () => {
        const main = document.querySelector('[data-testid="stMain"]');
        const now = [main?.scrollHeight, main?.scrollWidth, ...[...document.querySelectorAll('.main-svg')]
            .map(svg => `${svg.getAttribute('width')}x${svg.getAttribute('height')}`)].join();
        if (now !== last) { last = now; since = performance.now(); }
        if (performance.now() - since >= settleMs || performance.now() - start >= atMostMs) resolve(true);
        else setTimeout(look, 100);
    };
    look();
})"""


def open_page(page: Page, base_url: str, url_path: str = "", **params: object) -> None:
    """Open ``/url_path?params`` as a deep link and wait until its script run has finished."""
    query = f"?{urlencode({k: str(v) for k, v in params.items()})}" if params else ""
    page.goto(f"{base_url}/{url_path}{query}")
    wait_idle(page)


def wait_idle(page: Page) -> None:
    """Until the page's script has run and no follow-up run (e.g. syncing URL-bound widgets) starts, the run that
    builds a page's details once its picture is drawn (ui.when_idle.details_ready) included."""
    # The first page of a fresh server waits for the model: longer than expect()'s timeout (conftest).
    expect(page.get_by_test_id("stMainBlockContainer").locator("h1").first).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector(IDLE_APP, timeout=RUN_TIMEOUT_MS)
    page.evaluate(IDLE_FOR, [IDLE_FOR_MS, IDLE_AT_MOST_MS])
    page.wait_for_selector(IDLE_APP, timeout=RUN_TIMEOUT_MS)
    if page.evaluate(DETAILS_WAITING, DETAILS_KEYS):
        wait_for_details(page)
        page.evaluate(IDLE_FOR, [IDLE_FOR_MS, IDLE_AT_MOST_MS])
        page.wait_for_selector(IDLE_APP, timeout=RUN_TIMEOUT_MS)


def wait_for_details(page: Page) -> None:
    """Until every details component on the page has told and been drawn again. Its run is a page run like any
    other (RUN_TIMEOUT_MS); past that, the failure says where it stopped: in the browser (not told) or the server
    (told, its run not ended), and what the server's engine was doing."""
    try:
        page.wait_for_function(f"keys => !({DETAILS_WAITING})(keys)", arg=DETAILS_KEYS, timeout=RUN_TIMEOUT_MS,
                               polling=POLL_MS)
    except PlaywrightTimeout as late:
        state = page.evaluate(DETAILS_STATE, DETAILS_KEYS)
        raise AssertionError(f"details not drawn in {RUN_TIMEOUT_MS / 1000:.0f} s: page {json.dumps(state)}, "
                             f"server {_health(page.url)}, load average {os.getloadavg()}") from late


def _health(url: str) -> str:
    parts = urlsplit(url)
    try:
        with urllib.request.urlopen(f"{parts.scheme}://{parts.netloc}/health", timeout=10) as answer:
            return answer.read().decode()
    except OSError as error:
        return f"/health did not answer: {error}"


def wait_still(page: Page) -> None:
    """Until the layout has stopped moving (see LAYOUT_STILL), instead of a fixed pause."""
    page.evaluate(LAYOUT_STILL, [SETTLE_MS, STILL_AT_MOST_MS])


def main_text(page: Page) -> str:
    return page.get_by_test_id("stMainBlockContainer").inner_text()


def full_screenshot(page: Page, path) -> None:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to fit first."""
    height = page.evaluate(
        "() => Math.max(...['stMain', 'stSidebarContent'].map("
        "id => document.querySelector(`[data-testid=${id}]`)?.scrollHeight ?? 0))"
    )
    width = page.viewport_size["width"]
    page.set_viewport_size({"width": width, "height": max(900, min(int(height) + 40, 8000))})
    wait_idle(page)
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    wait_still(page)
    page.screenshot(path=path, full_page=True)


def present_key(page: Page, key: str) -> None:
    """Type an API key into the Live calls page's key box, as a visitor does, and wait for the rerun."""
    box = page.get_by_test_id("stMainBlockContainer").get_by_label("API key", exact=True).and_(page.locator("input"))
    box.fill(key)
    box.press("Enter")
    expect(page.get_by_test_id("stMainBlockContainer")).not_to_contain_text("you have not presented a key")
    wait_idle(page)


def key_shown(page: Page, key: str) -> bool:
    """Whether ``key`` is anywhere in the page (text or any attribute) besides the password box the
    visitor typed it into."""
    return page.evaluate(
        """key => document.body.innerText.includes(key) || [...document.querySelectorAll('*')]
            .filter(e => !(e.tagName === 'INPUT' && e.type === 'password'))
            .some(e => [...e.attributes].some(a => a.value.includes(key)))""",
        key,
    )

