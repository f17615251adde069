"""A real browser moves a what-if sampling slider and the distribution recomputes on the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.app_page import EXCEPTION, full_screenshot, open_page, wait_idle

pytestmark = pytest.mark.browser

PROMPT = "The capital of France is"


def metric(page, label: str) -> str:
    return page.get_by_test_id("stMetric").filter(has_text=label).get_by_test_id("stMetricValue").inner_text()


def test_moving_the_temperature_slider_reshapes_the_distribution(app_url, page, screenshots):
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, top_k=40, max_tokens=4)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    before = metric(page, "Entropy after")
    main = page.get_by_test_id("stMainBlockContainer")
    thumb = main.get_by_test_id("stSlider").filter(has_text="Temperature").get_by_role("slider")
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
