"""The Failures page in a real browser on a phone and a laptop (one page resized) and a projector (presenter mode): a real SDK call
through a 500 twice and a key rotated on 429, the timeline and tables drawn without cut tables or overlapping chart labels."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.app_page import EXCEPTION, full_screenshot, main_text, open_page, wait_idle, wait_still
from tests.browser.layout import chart_text_problems, table_problems

pytestmark = pytest.mark.browser

PROMPT = "Name a colour."
SIZES = {"phone": (390, 844), "laptop": (1366, 768)}  # one page resized; the projector in presenter mode


@pytest.mark.parametrize("present", [False, True], ids=["phone-and-laptop", "projector"])
def test_a_500_twice_is_drawn_attempt_by_attempt(app_url, page, screenshots, present):
    sizes = {"projector": (1024, 768)} if present else SIZES
    page.set_viewport_size(dict(zip(("width", "height"), next(iter(sizes.values())))))
    open_page(page, app_url, "failures", prompt=PROMPT, temperature=0, max_tokens=4,
              **({"present": "1"} if present else {}))
    expect(page.locator(EXCEPTION)).to_have_count(0)
    page.get_by_role("button", name="Call it with the openai SDK").click()
    wait_idle(page)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    text = main_text(page)
    assert "The SDK made 3 attempts" in text and "backoff allows" in text
    expect(page.locator(".js-plotly-plot")).to_have_count(1)
    assert chart_text_problems(page) == [] and table_problems(page) == []
    page.get_by_role("button", name="Run it live").click()  # the first pattern: rotate keys on 429
    wait_idle(page)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    assert "answered by key B" in main_text(page)
    for width, height in sizes.values():
        page.set_viewport_size({"width": width, "height": height})
        wait_idle(page)
        wait_still(page)
        assert chart_text_problems(page) == [] and table_problems(page) == []
        full_screenshot(page, screenshots / f"failures-{width}x{height}{'-present' if present else ''}.png")
