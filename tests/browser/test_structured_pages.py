"""The structured-output page and the logprob highlighting in a real browser, at projector sizes:
a streamed tool call's fragments, the grammar-mask chart, and the json_object mask on Sampling."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.app_page import EXCEPTION, full_screenshot, main_text, open_page, wait_idle

pytestmark = pytest.mark.browser

PROMPT = "What's the weather in Paris?"
SIZES = [(1366, 768), (1024, 768)]


def test_structured_output_page_follows_a_tool_call(app_url, page, screenshots):
    """One page, resized to each size."""
    open_page(page, app_url, "structured-output", prompt=PROMPT, temperature=0)
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        wait_idle(page)
        expect(page.locator(EXCEPTION)).to_have_count(0)
        text = main_text(page)
        assert "validates against its schema" in text and "What the stream sends" in text
        assert "prompt tokens" in text and "tool_calls" in text
        full_screenshot(page, screenshots / f"structured-output-{width}x{height}.png")


def test_logprob_highlighting_and_the_grammar_stage(app_url, page, screenshots):
    """Each page resized to each size."""
    open_page(page, app_url, "generation", prompt=PROMPT, temperature=0.7, max_tokens=24)
    page.get_by_role("tab", name="Log-probabilities").click()  # the whole run is replayed; its logprobs in a tab
    panel = page.get_by_role("tabpanel").filter(has_text="Each token coloured by the model's own probability")
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        wait_idle(page)
        expect(page.locator(EXCEPTION)).to_have_count(0)
        expect(panel.get_by_test_id("stPlotlyChart")).to_be_visible()
        full_screenshot(page, screenshots / f"generation-logprobs-{width}x{height}.png")

    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7)
    main = page.get_by_test_id("stMainBlockContainer")
    main.get_by_role("tab", name="The stages the API adds").click()
    main.get_by_text("grammar mask)").click()
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        wait_idle(page)
        expect(page.locator(EXCEPTION)).to_have_count(0)
        assert "can start a JSON object" in main_text(page)
        full_screenshot(page, screenshots / f"sampling-api-stages-{width}x{height}.png")
