"""The handout opens in Debian's chromium with the network off and shows every stage and chart; the game in a browser."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from charts.handout import handout_document
from lifecycle.stages.forward_pass import token_text
from lifecycle.journey import JourneyInput, run_journey
from lifecycle.stages.kv_cache import KVCacheShape
from tests.browser.app_page import CHARTS_DRAWN, EXCEPTION, POLL_MS, full_screenshot, main_text, open_page, wait_idle
from ui.stages import PHASES

PROMPT = 'Say hi. <script>window.injected = 1</script> & "quotes"'
pytestmark = pytest.mark.browser

JOURNEY_PHASES = ("The client and the API", "Inside the model", "Back to the client")


@pytest.fixture(scope="module")
def handout(loaded, tmp_path_factory) -> tuple[Path, list]:
    journey = run_journey(JourneyInput(prompt=PROMPT, max_tokens=6), loaded)
    html, sections = handout_document(journey, lambda i: token_text(loaded, i), KVCacheShape.of(loaded.model),
                                      loaded.context_window)
    path = tmp_path_factory.mktemp("handout") / "journey.html"
    path.write_text(html, encoding="utf-8")
    return path, sections


def test_handout_opens_offline_with_every_stage_and_chart(browser, handout, screenshots):
    path, sections = handout
    context = browser.new_context(viewport={"width": 1024, "height": 768}, offline=True)
    requests: list[str] = []
    context.on("request", lambda request: requests.append(request.url))
    context.route("http*://**", lambda route: route.abort())
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    charts = sum(len(s.figures) for s in sections)
    page.wait_for_function(f"document.querySelectorAll('.chart .main-svg').length >= {charts}", timeout=30_000,
                           polling=POLL_MS)
    headings = page.locator("h2").all_inner_texts()
    stages = [p.title for phase in JOURNEY_PHASES for p in PHASES[phase] if p.url_path not in ("",)]
    for title in stages:
        assert any(h.endswith(f". {title}") for h in headings), f"no section for stage {title!r}"
    assert page.locator(".chart").count() == charts >= 8
    assert page.evaluate("window.injected") is None  # the prompt's <script> is text, not code
    assert PROMPT in page.locator("pre").first.inner_text()
    assert not errors and all(url.startswith("file://") for url in requests)
    page.screenshot(path=screenshots / "handout-1024.png", full_page=True)
    context.close()


def test_one_click_on_the_page_downloads_the_handout(app_url, page, browser, tmp_path):
    open_page(page, app_url, "handout", prompt="Name a fruit.", max_tokens=4)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    with page.expect_download() as download:
        page.get_by_role("button", name="Download the handout (HTML)").click()
    saved = tmp_path / "handout.html"
    download.value.save_as(saved)
    context = browser.new_context(offline=True)
    opened = context.new_page()
    opened.goto(saved.as_uri())
    opened.wait_for_function("document.querySelectorAll('.chart .main-svg').length >= 8", timeout=30_000,
                             polling=POLL_MS)
    assert "Name a fruit." in opened.locator("pre").first.inner_text()
    context.close()


def test_a_round_of_the_game_in_the_browser(app_url, page, screenshots):
    open_page(page, app_url, "guess", prompt="Name a fruit.", max_tokens=4)
    main = page.get_by_test_id("stMainBlockContainer")
    expect(main.get_by_text("Rank", exact=True)).to_have_count(0)
    main.get_by_role("textbox", name="…or type your own guess").fill("Apple")
    main.get_by_role("button", name="Lock in and reveal").click()
    expect(main.get_by_text("Rank", exact=True)).to_be_visible()
    wait_idle(page)
    assert "was read as the token" in main_text(page)
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    page.set_viewport_size({"width": 1024, "height": 768})
    full_screenshot(page, screenshots / "guess-revealed-1024.png")
    main.get_by_role("button", name="Next round").click()
    expect(main.get_by_text("Round 2 of 4")).to_be_visible()
