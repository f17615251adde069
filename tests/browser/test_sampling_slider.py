"""A real browser moves a what-if sampling slider: the distribution recomputes, and how fast the chart redraws.

The redraw time (key press to the resampling chart's SVG changing) is measured and written to
screenshots/slider-latency.json, which `make bench` prints; it is a figure, not an assertion.
"""

from __future__ import annotations

import json
import statistics

import pytest
from playwright.sync_api import expect

from bench.browser import SLIDER_LATENCY_FILE
from tests.browser.app_page import EXCEPTION, full_screenshot, open_page, wait_idle

pytestmark = pytest.mark.browser

PROMPT = "The capital of France is"
STEPS = 8

# Time from a key press on the focused slider to the first change in the resampling chart's SVG.
# The chart is the page's first Plotly chart; React may replace its nodes, so watch the whole main block.
_WATCH = """() => {
  const inChart = (node) => {
    const element = node.nodeType === 1 ? node : node.parentElement;
    const chart = element?.closest('[data-testid="stPlotlyChart"]');
    return chart !== null && chart === document.querySelector('[data-testid="stPlotlyChart"]');
  };
  window.redraw = {pressed: null, drawn: null};
  document.addEventListener('keydown', () => { window.redraw = {pressed: performance.now(), drawn: null}; },
                            {capture: true});
  new MutationObserver((mutations) => {
    if (window.redraw.pressed !== null && window.redraw.drawn === null && mutations.some(m => inChart(m.target)))
      window.redraw.drawn = performance.now();
  }).observe(document.querySelector('[data-testid="stMain"]'),
             {subtree: true, childList: true, attributes: true, characterData: true});
}"""


def metric(page, label: str) -> str:
    return page.get_by_test_id("stMetric").filter(has_text=label).get_by_test_id("stMetricValue").inner_text()


def _thumb(page):
    main = page.get_by_test_id("stMainBlockContainer")
    return main.get_by_test_id("stSlider").filter(has_text="Temperature").get_by_role("slider")


def test_moving_the_temperature_slider_reshapes_the_distribution(app_url, page, screenshots):
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, top_k=40, max_tokens=4)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    before = metric(page, "Entropy after")
    thumb = _thumb(page)
    expect(thumb).to_have_value("0.7")
    thumb.focus()
    for _ in range(10):  # 10 steps of 0.05: 0.7 -> 0.2
        thumb.press("ArrowLeft")
    expect(thumb).to_have_value("0.2")
    expect(page.get_by_test_id("stMetric").filter(has_text="Entropy after")).not_to_contain_text(before)
    wait_idle(page)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    # A lower temperature sharpens the distribution: less uncertainty left.
    assert float(metric(page, "Entropy after").split()[0]) < float(before.split()[0])
    # It was a what-if: the sidebar (the journey's settings) still says 0.7.
    sidebar_thumb = page.get_by_test_id("stSidebar").get_by_test_id("stSlider").filter(
        has_text="Temperature").get_by_role("slider")
    expect(sidebar_thumb).to_have_value("0.7")
    full_screenshot(page, screenshots / "sampling-what-if.png")


def test_slider_step_redraw_time_is_measured(app_url, page, screenshots):
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, max_tokens=4)
    page.evaluate(_WATCH)
    thumb = _thumb(page)
    thumb.focus()
    times = []
    for step in range(STEPS):
        thumb.press("ArrowRight")
        page.wait_for_function("() => window.redraw.drawn !== null")
        times.append(page.evaluate("() => window.redraw.drawn - window.redraw.pressed"))
        wait_idle(page)
    expect(thumb).to_have_value(f"{0.7 + 0.05 * STEPS:.1f}")
    median = statistics.median(times)
    (screenshots / SLIDER_LATENCY_FILE).write_text(json.dumps(
        {"median_ms": round(median, 1), "min_ms": round(min(times), 1), "max_ms": round(max(times), 1),
         "steps": STEPS}) + "\n")
    print(f"\nslider redraw median {median:.0f} ms: {[round(t) for t in times]}")
    assert all(t > 0 for t in times)
