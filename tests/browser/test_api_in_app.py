"""`streamlit run app.py` serves the OpenAI-compatible API next to the pages, and a call made with the
official openai SDK shows up, with its journey, on the Live calls page in a real browser."""

from __future__ import annotations

import json
import re
import time

import httpx
import openai
import pytest
from playwright.sync_api import expect

from tests.browser.app_page import EXCEPTION, full_screenshot, key_shown, main_text, open_page, present_key
from tests.browser.conftest import API_KEY_NAME, PAGE_TIMEOUT_MS

pytestmark = pytest.mark.browser

HEALTH_SECONDS = 120


def _wait_ready(app_url: str) -> list[int]:
    """Poll /health until the model is loaded; every answer on the way is 503 (loading) or 200."""
    statuses: list[int] = []
    deadline = time.monotonic() + HEALTH_SECONDS
    while time.monotonic() < deadline and statuses[-1:] != [200]:
        statuses.append(httpx.get(f"{app_url}/health", timeout=10).status_code)
        if statuses[-1] != 200:
            time.sleep(0.5)
    return statuses


def test_sdk_call_to_the_app_appears_in_live_calls_with_its_journey(app_url, api_key, page, screenshots):
    statuses = _wait_ready(app_url)
    assert statuses[-1] == 200 and set(statuses) <= {200, 503}, statuses
    health = httpx.get(f"{app_url}/health").json()
    client = openai.OpenAI(base_url=f"{app_url}/v1", api_key=api_key, max_retries=0, timeout=300)
    assert [model.id for model in client.models.list().data] == [health["model"]]

    raw = client.chat.completions.with_raw_response.create(
        model=health["model"], messages=[{"role": "user", "content": "Say hi."}], temperature=0, max_tokens=8,
        stream=True, stream_options={"include_usage": True},
    )
    request_id = raw.headers["x-request-id"]
    chunks = list(raw.parse())
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    usage = chunks[-1].usage
    assert text and usage.completion_tokens <= 8 and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens

    open_page(page, app_url, "live-calls", call=request_id)
    assert request_id not in main_text(page)  # a visitor without the key sees nothing of the call
    present_key(page, api_key)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    main = page.get_by_test_id("stMainBlockContainer")
    expect(main.get_by_role("heading", name=f"The journey of {request_id}")).to_be_visible()
    shown = main_text(page)
    assert "POST /v1/chat/completions" in shown and "authorization: Bearer <redacted>" in shown
    assert not key_shown(page, api_key)
    assert f"Key name: {API_KEY_NAME}" in shown
    frames = len(chunks) + 1  # the SDK consumes [DONE] without yielding it
    assert f"{frames} frames left the server" in shown
    assert text in shown
    usage_block = next(
        block.inner_text() for block in main.get_by_test_id("stCode").all()
        if '"total_tokens"' in block.inner_text() and "choices" not in block.inner_text()
    )
    assert json.loads(usage_block) == usage.model_dump(exclude_none=True)
    expect(main.locator(".js-plotly-plot")).to_have_count(3)  # the engine's batch, the context budget, the frame timeline
    full_screenshot(page, screenshots / "live-calls-journey.png")

    # A new call while the page is open shows up by itself ("Watch for new calls" is on by default).
    logged = int(re.search(r"shows (\d+) of your key", main_text(page)).group(1))
    client.chat.completions.create(model=health["model"], messages=[{"role": "user", "content": "Hi"}], max_tokens=1)
    # The page's next look (every 2 s alone) reruns it: 1.4 s here alone; at the end of a make test whose workers
    # fill both cores it once took over 30 s (expect()'s timeout, conftest), so it waits a page's timeout.
    expect(main).to_contain_text(f"shows {logged + 1} of your key", timeout=PAGE_TIMEOUT_MS)

    main.get_by_test_id("stExpander").filter(has_text="How to call it").locator("summary").click()
    curl = main.get_by_test_id("stCode").filter(has_text="curl -N").inner_text()
    assert f"{app_url}/v1/chat/completions" in curl and "$LIFECYCLE_API_KEY" in curl
    assert f'base_url="{app_url}/v1"' in main.get_by_test_id("stCode").filter(has_text="from openai").inner_text()
    assert not key_shown(page, api_key)
    full_screenshot(page, screenshots / "live-calls-how-to.png")
