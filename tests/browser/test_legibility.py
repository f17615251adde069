"""Every page looked at in a real browser at a laptop, a projector and a phone size: screenshots for a
person to open, and DOM checks that no chart label overlaps another or leaves its chart, that no
table cuts a column, and that no link label or heading word is cut. Presenter mode puts a chart on the first screen of a 1024x768 projector."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.app_page import CHARTS_DRAWN, EXCEPTION, SETTLE_MS, full_screenshot, open_page, wait_idle
from tests.browser.conftest import PAGE_TIMEOUT_MS
from tests.browser.layout import chart_text_problems, cut_text_problems, first_top, table_problems
from ui.stages import HOME, STAGES, neighbours

pytestmark = pytest.mark.browser

SIZES = {"laptop": (1366, 768), "projector": (1024, 768), "phone": (390, 844)}
PAGES = [HOME, *STAGES]
PAGE_IDS = [page.url_path or "home" for page in PAGES]
# Each page's main visual, which presenter mode must bring onto the first screen of a projector: the
# first Plotly chart, except where the page's main content is something else.
CHART = '[data-testid="stPlotlyChart"]'
MAIN_VISUAL = {
    "": '[data-testid="stColumn"] [data-testid="stPageLink"]',  # the journey map itself
    "request": '[data-testid="stCode"]',  # the request body
    "gateway": '[data-testid="stColumn"]',  # the call's steps through the gateway
    "failures": '[data-testid="stForm"]',  # the fault and the client's settings (the timeline comes once sent)
    "tokenization": ".token-chips",  # the prompt cut into tokens
    "live-calls": '[data-testid="stMetric"]',  # the model and its queue, live
    "sampling": ".live-sampling svg",  # the live chart (ui/live_sampling.js), drawn in SVG, not Plotly
    "guess": '[data-testid="stForm"], [data-testid="stPlotlyChart"]',  # the round: its options, then its answer
    "handout": '[data-testid="stTable"]',  # what the handout holds, stage by stage
    "agent": '[data-testid="stDataFrame"]',  # the agent loop's rounds (its measurements come further down)
}
MIN_SHOWN_PX = 200  # of the main visual, inside the first screen


# What the checks still find, page by page: (page, size) -> why. Strict: a fix turns it into a failure until
# the entry is removed, so this list can only shrink. Empty since the 1 Dec 2026 run.
NOT_YET_LEGIBLE: dict[tuple[str, str], str] = {}
# Pages whose main visual is not yet on a 1024x768 projector's first screen in presenter mode.
NOT_YET_PRESENTED: dict[str, str] = {}


def _legibility_cases():
    for stage, name in zip(PAGES, PAGE_IDS):
        for size in SIZES:
            reason = NOT_YET_LEGIBLE.get((name, size))
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            yield pytest.param(size, stage, marks=marks, id=f"{name}-{size}")


@pytest.fixture
def sized_page(browser, request):
    width, height = SIZES[request.param]
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    yield request.param, context.new_page()
    context.close()


@pytest.mark.parametrize(("sized_page", "stage"), list(_legibility_cases()), indirect=["sized_page"])
def test_every_page_is_legible(app_url, sized_page, screenshots, stage):
    size, page = sized_page
    open_page(page, app_url, stage.url_path)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    folder = screenshots / size
    folder.mkdir(exist_ok=True)
    full_screenshot(page, folder / f"{stage.url_path or 'home'}.png")
    assert chart_text_problems(page) == []
    assert table_problems(page) == []
    assert cut_text_problems(page) == []


def _presenter_cases():
    for stage, name in zip(PAGES, PAGE_IDS):
        reason = NOT_YET_PRESENTED.get(name)
        # Not strict: how far down the main visual starts depends on live content (the engine panel, a game round).
        marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
        yield pytest.param(stage, marks=marks, id=name)


@pytest.mark.parametrize("stage", list(_presenter_cases()))
def test_presenter_mode_shows_the_main_visual_on_the_first_screen_of_a_projector(app_url, browser, screenshots,
                                                                                 stage):
    context = browser.new_context(viewport={"width": 1024, "height": 768})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page = context.new_page()
        open_page(page, app_url, stage.url_path, present=1)
        page.wait_for_function(CHARTS_DRAWN)
        page.wait_for_timeout(SETTLE_MS)
        folder = screenshots / "presenter"
        folder.mkdir(exist_ok=True)
        page.screenshot(path=folder / f"{stage.url_path or 'home'}.png")
        assert page.get_by_test_id("stMain").bounding_box()["x"] < 50  # the sidebar is closed
        top = first_top(page, MAIN_VISUAL.get(stage.url_path, CHART))
        assert top is not None and top + MIN_SHOWN_PX <= 768, f"the main visual starts at {top} px"
    finally:
        context.close()


def test_presenter_mode_arrow_keys_walk_the_stages(app_url, page):
    first = STAGES[2]
    _, after = neighbours(first)
    open_page(page, app_url, first.url_path, present=1)
    expect(page.get_by_test_id("stProgress")).to_contain_text(f"Stage 3 of {len(STAGES)}")
    page.wait_for_function("() => window.lifecycleKeys === true")  # ui/presenter/keys.js is listening
    main = page.get_by_test_id("stMainBlockContainer")
    next_link = main.get_by_role("link", name=re.compile(f"Next: {re.escape(after.title)}"))
    expect(next_link).to_be_visible()
    expect(next_link).to_have_attribute("href", re.compile(r"present=1"))  # the switch cannot drop it
    page.evaluate("() => document.activeElement?.blur()")  # keys go to the page, not a widget
    page.keyboard.press("ArrowRight")
    expect(page).to_have_url(re.compile(rf"/{after.url_path}\?(.*&)?present=1"), timeout=PAGE_TIMEOUT_MS)
    wait_idle(page)
    assert page.get_by_test_id("stMainBlockContainer").locator("h1").first.inner_text() == after.title
    page.keyboard.press("ArrowLeft")
    expect(page).to_have_url(re.compile(rf"/{first.url_path}\?"), timeout=PAGE_TIMEOUT_MS)


def test_presenter_mode_cuts_the_lesson_to_its_first_sentences(app_url, page):
    open_page(page, app_url, "embeddings")
    lesson = page.get_by_test_id("stMainBlockContainer").get_by_test_id("stMarkdown").filter(
        has_text="Your message became")
    full = lesson.first.inner_text()
    open_page(page, app_url, "embeddings", present=1)
    main = page.get_by_test_id("stMainBlockContainer")
    short = lesson.first.inner_text()
    assert full.startswith(short) and len(short) < len(full) / 2
    expect(main.get_by_test_id("stExpander").filter(has_text="More of this lesson")).to_be_visible()


def test_send_it_for_real_starts_at_this_servers_own_address(app_url, page):
    open_page(page, app_url, "request")
    box = page.get_by_test_id("stMainBlockContainer").get_by_role("textbox", name="Base URL")
    expect(box).to_have_value(f"{app_url}/v1")
