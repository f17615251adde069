"""Every page opened by a deep link in a real browser and looked at at a laptop, a projector and a phone
size: screenshots for a person to open, and DOM checks that no chart label overlaps another or leaves its chart
(Plotly's and the live SVG figures', a step replay at three of its states), that no table cuts a column, that no
link label, metric or heading word is cut, and that a model stage leads with its picture (a page led by an SVG
component of the app's own draws it before plotly.js is loaded). Then presenter mode as a teacher uses it: a link
with ?present=1 on a 1024x768 projector and the arrow keys through every stage, each page's main visual on the
first screen."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.app_page import (CHARTS_DRAWN, EXCEPTION, PAGE_TIMEOUT_MS, POLL_MS, full_screenshot, main_text,
                                   open_page, wait_idle, wait_still)
from tests.browser.layout import (chart_text_problems, cut_text_problems, first_top, live_figure_problems,
                                  table_problems, wait_for_visual)
from ui.frame import APP_TITLE
from ui.stages import HOME, PHASES, STAGES, StagePage
from ui.when_idle import DETAILS_PENDING

pytestmark = pytest.mark.browser

SIZES = {"laptop": (1366, 768), "projector": (1024, 768), "phone": (390, 844)}  # widest first: one page resized
PAGES = [HOME, *STAGES]
PAGE_IDS = [page.url_path or "home" for page in PAGES]
PROMPT = "Why do cats purr? Answer briefly."  # not the default: every page must carry the link's prompt
# Each page's main visual, which presenter mode must bring onto the first screen of a projector: the
# first Plotly chart, except where the page's main content is something else.
CHART = '[data-testid="stPlotlyChart"]'
MAIN_VISUAL = {
    "": '[data-testid="stColumn"] [data-testid="stPageLink"]',  # the journey map itself
    "request": ".live-code pre",  # the request body (ui/live_code.js)
    "gateway": '[data-testid="stColumn"]',  # the call's steps through the gateway
    "failures": '[data-testid="stForm"]',  # the fault and the client's settings (the timeline comes once sent)
    "tokenization": ".token-chips",  # the prompt cut into tokens
    "live-calls": '[data-testid="stMetric"]',  # the model and its queue, live
    "context-window": ".live-bars svg",  # the budget (ui/live_bars.js), drawn in SVG
    "embeddings": ".live-strip svg",  # the strip of input vectors (ui/live_strip.js)
    "next-token": ".live-bars svg",  # the top candidates (ui/live_bars.js), drawn in SVG, not Plotly
    "sampling": ".live-sampling svg",  # the live chart (ui/live_sampling.js), drawn in SVG, not Plotly
    "attention": ".live-attention svg",  # the live maps (ui/live_attention.js)
    "forward-pass": ".live-block svg",  # the live block (ui/live_block.js)
    "guess": '[data-testid="stForm"], [data-testid="stPlotlyChart"]',  # the round: its options, then its answer
    "handout": '.handout-contents',  # what the handout holds, stage by stage
    "generation": ".live-replay svg",  # the step replay (ui/live_replay.js), drawn in SVG
    "kv-cache": ".live-replay svg",  # the growth slider's bars
    "streaming": ".live-replay svg",  # the recorded stream's replay
    "agent": ".live-bars svg",  # the agent loop's rounds (ui/live_bars.js; its measurements come further down)
    "structured-output": ".live-bars svg",  # the mask's columns (ui/live_bars.js)
    "detokenization": ".live-bars svg",  # the answer's bytes per token (ui/live_bars.js)
}
MIN_SHOWN_PX = 200  # of the main visual, inside the first screen


# The model-stage pages ("Inside the model" and "Back to the client"), which must lead with their picture in
# normal mode too, at a laptop's and a projector's size, and stay within a few screens.
MODEL_STAGES = [page for phase in ("Inside the model", "Back to the client") for page in PHASES[phase]]
FIRST_SCREEN_SIZES = ("laptop", "projector")
MAX_SCREENS = 5  # page height at 1024x768


_HEALTH_ASKS = "performance.getEntriesByType('resource').map(r => r.name).filter(n => n.endsWith('/_stcore/health'))"


@pytest.mark.parametrize("stage", PAGES, ids=PAGE_IDS)
def test_every_page_opens_by_deep_link_and_is_legible(app_url, page, screenshots, stage):
    """The page opened once by a deep link carrying a prompt, at the widest size, then resized to each of the
    others (the frontend lays out again: columns stack, charts redraw, the sidebar closes on a phone), with
    every check at each. A model-stage page must also start its main visual on the first screen at the
    laptop's and the projector's size, and stay within MAX_SCREENS of the projector's height."""
    width, height = SIZES["laptop"]
    page.set_viewport_size({"width": width, "height": height})
    problems: dict[str, list[str]] = {}
    if stage.url_path in PICTURE_BEFORE_PLOTLY:
        page.add_init_script(f"({_WATCH_ORDER})({json.dumps(MAIN_VISUAL[stage.url_path])})")
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    open_page(page, app_url, stage.url_path, prompt=PROMPT)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    # The frontend asked where the server is once, at the app's root (ui/deep_links.py), not at the page's path first.
    assert page.evaluate(_HEALTH_ASKS) == [f"{app_url}/_stcore/health"]
    if stage.url_path in PICTURE_BEFORE_PLOTLY:
        _picture_came_first(page)
    title = APP_TITLE if stage is HOME else stage.title
    assert page.get_by_test_id("stMainBlockContainer").locator("h1").first.inner_text() == title
    # Nothing is asked of any other server (a visitor's address and what they read stay between them and this app).
    assert [url for url in requested if not url.startswith((app_url, "data:", "blob:"))] == []
    assert PROMPT in main_text(page)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        wait_idle(page)
        expect(page.locator(EXCEPTION)).to_have_count(0)
        folder = screenshots / size
        folder.mkdir(exist_ok=True)
        found = []
        if stage in MODEL_STAGES and size in FIRST_SCREEN_SIZES:
            found += _lead_problems(page, stage, size)
            page.screenshot(path=folder / f"{stage.url_path}-first-screen.png")
        found += live_figure_problems(page) + _replay_state_problems(page)
        full_screenshot(page, folder / f"{stage.url_path or 'home'}.png")
        found += chart_text_problems(page) + table_problems(page) + cut_text_problems(page)
        if found:
            problems[size] = found
    assert problems == {}


# Pages led by a picture of the app's own (an SVG component; Tokenization's chips) whose Plotly charts come in the
# details' run (ui.when_idle.details_ready). The script records, from the page's first paint, when the picture was
# first drawn and when the first Plotly chart element appeared.
PICTURE_BEFORE_PLOTLY = ("tokenization", "embeddings", "attention", "next-token", "sampling", "generation", "kv-cache",
                         "streaming", "agent")
_WATCH_ORDER = """(picture) => document.addEventListener('DOMContentLoaded', () => {
  window.order = {};
  const seen = () => {
    if (window.order.picture === undefined && document.querySelector(picture)) window.order.picture = performance.now();
    if (window.order.plotly === undefined && document.querySelector('[data-testid="stPlotlyChart"]'))
      window.order.plotly = performance.now();
  };
  new MutationObserver(seen).observe(document.body, {childList: true, subtree: true});
})"""


def _picture_came_first(page: Page) -> None:
    """A new tab of the page drew its picture before any Plotly chart was on the page (plotly.js, ~1 s of the
    browser's CPU, is never in its way), and the details under it arrived by themselves: its Plotly charts, drawn,
    and no placeholder left."""
    # A details run that waits on a measurement (KV cache's timings) may still be on its way: its charts must come.
    page.wait_for_function("() => document.querySelector('[data-testid=\"stPlotlyChart\"]')", polling=POLL_MS)
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    order = page.evaluate("window.order")
    assert "picture" in order and "plotly" in order, order
    assert order["picture"] < order["plotly"], f"the picture waited for Plotly: {order}"
    expect(page.get_by_test_id("stMainBlockContainer")).not_to_contain_text(DETAILS_PENDING)


# The presenter walk in two halves (the first from the journey map, the second from a link to its first stage), so
# that two workers share it.
WALKS = [PAGES[:len(PAGES) // 2], PAGES[len(PAGES) // 2:]]


@pytest.mark.parametrize("walk", WALKS, ids=["first-half", "second-half"])
def test_presenter_mode_walks_every_page_with_its_visual_on_the_first_screen(app_url, page, screenshots, walk):
    """What a teacher does at a projector: open a page by a link with ?present=1, then the arrow keys through the
    stages (each an in-app page switch carrying the prompt and presenter mode). On every page: the sidebar closed,
    the prompt followed, the main visual on the first screen; a screenshot of each. ArrowLeft goes back."""
    width, height = SIZES["projector"]
    page.set_viewport_size({"width": width, "height": height})
    problems: dict[str, list[str]] = {}
    folder = screenshots / "presenter"
    folder.mkdir(exist_ok=True)
    open_page(page, app_url, walk[0].url_path, prompt=PROMPT, present=1)
    page.wait_for_function("() => window.lifecycleKeys === true", polling=POLL_MS)  # ui/presenter/keys.js is listening
    for stage in walk:
        if stage is not walk[0]:
            _press(page, "ArrowRight", stage)
        title = APP_TITLE if stage is HOME else stage.title
        expect(page.get_by_test_id("stMainBlockContainer").locator("h1").first).to_have_text(title)
        if found := _presenter_problems(page, stage, height, folder):
            problems[stage.url_path or "home"] = found
    _press(page, "ArrowLeft", walk[-2])
    assert problems == {}


def _press(page: Page, key: str, arriving: StagePage) -> None:
    """Press ``key`` on the page (not in a widget) and wait until ``arriving`` has run, in presenter mode."""
    page.evaluate("() => document.activeElement?.blur()")
    page.keyboard.press(key)
    expect(page).to_have_url(re.compile(rf"/{arriving.url_path}\?(.*&)?present=1"))
    wait_idle(page)


def _presenter_problems(page: Page, stage: StagePage, height: int, folder) -> list[str]:
    """On this presenter-mode page (its larger type): no exception, the prompt followed, the sidebar closed, the
    main visual on the first screen, and no chart label of a live figure overlapping another or leaving it."""
    expect(page.locator(EXCEPTION)).to_have_count(0)
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    wait_for_visual(page, MAIN_VISUAL.get(stage.url_path, CHART))
    wait_still(page)
    page.screenshot(path=folder / f"{stage.url_path or 'home'}.png")
    found = live_figure_problems(page)
    if PROMPT not in main_text(page):
        found.append("the prompt was not carried")
    if page.get_by_test_id("stMain").bounding_box()["x"] >= 50:
        found.append("the sidebar is open")
    top = first_top(page, MAIN_VISUAL.get(stage.url_path, CHART))
    if top is None or top + MIN_SHOWN_PX > height:
        found.append(f"the main visual starts at {top} px of {height}")
    return found


def _replay_state_problems(page: Page) -> list[str]:
    """A step replay (Generation, KV cache, Streaming) drawn at two more of its states: its last two buttons
    but Play, each clicked in turn, redraw it in the browser; its texts must stay legible in each."""
    found = []
    for button in page.locator(".live-replay .lr-controls button:not([disabled])").all()[-2:]:
        if "Play" not in button.inner_text():
            button.click()
            found += live_figure_problems(page)
    return found


def _lead_problems(page: Page, stage: StagePage, size: str) -> list[str]:
    """At this window size: the main visual starts on the first screen; at the projector's, the page is at most
    MAX_SCREENS tall."""
    found = []
    height = SIZES[size][1]
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    wait_for_visual(page, MAIN_VISUAL.get(stage.url_path, CHART))
    wait_still(page)
    top = first_top(page, MAIN_VISUAL.get(stage.url_path, CHART))
    if top is None or top + MIN_SHOWN_PX > height:
        found.append(f"the main visual starts at {top} px of {height}")
    tall = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    if size == "projector" and tall > MAX_SCREENS * height:
        found.append(f"the page is {tall / height:.1f} screens tall")
    return found


def test_a_lesson_shows_its_first_sentences_and_folds_the_rest(app_url, page):
    """A lesson's first two sentences stay on screen, so the picture comes up: the rest is in a "More of this
    lesson" expander right under them, or in presenter mode (the first sentence, two while short) in one at the
    end of the page, after the figures."""
    open_page(page, app_url, "next-token")
    main = page.get_by_test_id("stMainBlockContainer")
    lesson = main.get_by_test_id("stMarkdown").filter(has_text="The most likely next token is").first
    short = lesson.inner_text()
    more = main.get_by_test_id("stExpander").filter(has_text="More of this lesson")
    expect(more).to_have_count(1)
    bars = main.locator(".live-bars")
    assert more.bounding_box()["y"] < bars.bounding_box()["y"]  # right under the sentences, above the chart
    more.locator("summary").click()
    expect(more.get_by_test_id("stMarkdown").first).to_contain_text("The entropy is")
    assert "After reading all" in short and "The entropy is" not in short

    open_page(page, app_url, "next-token", present=1)
    expect(lesson).to_contain_text("The most likely next token is")
    assert "The entropy is" not in lesson.inner_text()
    expect(more).to_have_count(1)
    assert more.bounding_box()["y"] > bars.bounding_box()["y"]  # presenter mode: at the end of the page


def test_send_it_for_real_starts_at_this_servers_own_address(app_url, page):
    open_page(page, app_url, "request")
    main = page.get_by_test_id("stMainBlockContainer")
    # The JSON body (ui/live_code.js) shows exactly the text the page sent, its keys coloured as keys.
    body = main.locator(".live-code")
    sent = body.evaluate("root => root.liveData.text")
    assert body.locator("pre").inner_text() == sent and json.loads(sent)["messages"]
    assert body.locator(".lc-key").first.inner_text() == '"model"'
    main.get_by_role("tab", name="Send it for real").click()
    box = main.get_by_role("textbox", name="Base URL")
    expect(box).to_have_value(f"{app_url}/v1")


def test_the_request_page_opens_without_plotly_and_draws_its_chart_when_asked(app_url, page, screenshots):
    """The Request page holds no Plotly chart until its one chart's expander is opened (a chart anywhere on a
    page makes a new tab load and run plotly.js first): opened, it draws the turns, legibly."""
    open_page(page, app_url, "request")
    # Every element's code has loaded: a chart would be there by now.
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    main = page.get_by_test_id("stMainBlockContainer")
    assert main.get_by_test_id("stPlotlyChart").count() == 0
    main.get_by_role("tab", name="Every turn sends it all").click()
    main.get_by_test_id("stExpander").filter(has_text="Tokens sent per turn, as a chart").locator("summary").click()
    # The expander's run sends the page's first chart: plotly.js loads and runs first, seconds on a busy machine.
    expect(main.get_by_test_id("stPlotlyChart").locator(".main-svg").first).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    wait_still(page)
    assert chart_text_problems(page) == []
    main.get_by_test_id("stPlotlyChart").first.screenshot(path=screenshots / "request-resent-chart.png")
