"""In a real browser: the Generation page shows its tokens as they arrive, and Live calls shows the engine's batch."""

from __future__ import annotations

import re
import threading
import time

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.app_page import CHARTS_DRAWN, EXCEPTION, POLL_MS, open_page, wait_idle
from tests.browser.layout import table_problems

pytestmark = pytest.mark.browser

HEALTH_SECONDS = 120


def _ready_model(app_url: str) -> str:
    """The served model's name, once /health says it is loaded (a fresh server answers 503 while loading)."""
    deadline = time.monotonic() + HEALTH_SECONDS
    while True:
        health = httpx.get(f"{app_url}/health", timeout=10)
        if health.status_code == 200 or time.monotonic() > deadline:
            return health.json()["model"]
        time.sleep(0.5)


PROGRESS = re.compile(r"Generating on the model: (\d+) of at most (\d+) tokens so far")


def test_generation_shows_tokens_as_they_arrive_then_the_finished_page(app_url, page, screenshots):
    params = {"prompt": "Write a short poem about the sea, four lines.", "max_tokens": 120, "temperature": 0}
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"{app_url}/generation?" + "&".join(f"{k}={v}" for k, v in params.items()))
    progress = page.get_by_text(PROGRESS)
    expect(progress).to_be_visible(timeout=120_000)
    counts = []
    for _ in range(40):
        shown = progress.all_inner_texts()  # no waiting: the box can go between a look and a read
        if not shown:
            break
        match = PROGRESS.search(shown[0])
        if match:
            counts.append(int(match.group(1)))
            if len(counts) == 2:
                page.screenshot(path=screenshots / "room-generation-progress-1024.png")
        page.wait_for_timeout(500)
    assert len(set(counts)) >= 2 and counts == sorted(counts), counts  # the count grew while we watched
    wait_idle(page)
    expect(page.get_by_text(PROGRESS)).to_have_count(0)  # the progress box gives way to the page
    assert page.locator(EXCEPTION).count() == 0
    expect(page.get_by_text("Step by step", exact=True)).to_be_visible()


SIZES = [(1366, 768), (1024, 768), (390, 844)]


def test_live_calls_shows_the_batch_while_sessions_generate(app_url, api_key, page, screenshots):
    """One page, resized to each size in turn while the calls go on: the batch is shown at every size, and its
    table of running requests fits its box (on a phone, a narrow view)."""
    model = _ready_model(app_url)
    seen = threading.Event()
    failures: list[str] = []

    def keep_calling(n: int) -> None:
        """API calls one after another until the page has shown the batch: a greedy answer may end early, and a
        single call could finish before a slow page has loaded (the panel then rightly shows a batch of 0)."""
        round_ = 0
        while not seen.is_set():
            round_ += 1
            reply = httpx.post(f"{app_url}/v1/chat/completions", timeout=300,
                               headers={"authorization": f"Bearer {api_key}"},
                               json={"model": model, "max_tokens": 60, "temperature": 0, "messages": [
                                   {"role": "user", "content": f"Count from 1 to {300 + 10 * round_ + n} in words."}]})
            if reply.status_code == 429:  # the suite shares one key's rate limit: wait as a client would
                time.sleep(float(reply.headers.get("retry-after", "1")))
            elif reply.status_code != 200:
                failures.append(reply.text[:300])
                return

    cut: dict[int, list[str]] = {}
    callers = [threading.Thread(target=keep_calling, args=(n,)) for n in range(4)]
    for caller in callers:
        caller.start()
    try:
        width, height = SIZES[0]
        page.set_viewport_size({"width": width, "height": height})
        open_page(page, app_url, "live-calls")
        for width, height in SIZES:
            page.set_viewport_size({"width": width, "height": height})
            section = page.get_by_text("The engine: every model call, batched")
            expect(section).to_be_visible()
            batch = page.get_by_test_id("stMetric").filter(has_text="In the batch now")
            expect(batch).to_contain_text(re.compile(r"In the batch now\s*[1-9]"), timeout=60_000)
            # The section redraws every second, so its elements come and go: no scrolling to one of them.
            page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
            page.screenshot(path=screenshots / f"room-live-calls-engine-{width}.png", full_page=True)
            running = page.get_by_test_id("stDataFrame").filter(visible=True).first
            running.screenshot(path=screenshots / f"room-live-calls-batch-table-{width}.png")
            cut[width] = table_problems(page)
    finally:
        seen.set()
        for caller in callers:
            caller.join(300)
    assert failures == []
    assert page.locator(EXCEPTION).count() == 0
    assert cut == {width: [] for width, _ in SIZES}
