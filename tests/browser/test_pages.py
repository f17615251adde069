"""The real app in a real browser: a deep link on a fresh server, the prompt carried across pages, no script
injection. (Every page's own deep link is opened by test_legibility, which looks at it at three sizes.)"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import PAGE_TIMEOUT_MS
from tests.browser.app_page import EXCEPTION, main_text, open_page, wait_idle
from ui.settings import DEFAULT_PROMPT
from ui.stages import STAGES

pytestmark = pytest.mark.browser

PROMPT = "Why do cats purr? Answer briefly."
HOSTILE = '<img src=x onerror=alert(1)> <script>alert(2)</script> [x](javascript:alert(3))'


def test_deep_link_on_a_fresh_server_runs_inside_the_frame(fresh_app_url, page):
    open_page(page, fresh_app_url, "attention", prompt=PROMPT)
    assert page.get_by_test_id("stMainBlockContainer").locator("h1").first.inner_text() == "Attention"
    sidebar = page.get_by_test_id("stSidebar")
    expect(sidebar.get_by_test_id("stSidebarNavLink")).to_have_count(len(STAGES) + 1)
    expect(sidebar.get_by_role("textbox", name="Prompt", exact=True)).to_have_value(PROMPT)


# Seen once in three full runs (1 Dec 2026): after the sidebar click the widgets kept the prompt and
# temperature 0.2 but the page's run arrived without the query, and the URL stayed "/sampling" for good.
# ui/settings.restore_lost_query writes such values back (tests/pages/test_frame.py reproduces the loss).
def test_sidebar_navigation_keeps_the_prompt_and_settings_in_the_url(app_url, page):
    open_page(page, app_url, "tokenization", prompt=PROMPT, temperature=0.2)
    page.get_by_test_id("stSidebarNavLink").filter(has_text="Sampling").click()
    expect(page).to_have_url(re.compile(r"/sampling\?"), timeout=PAGE_TIMEOUT_MS)  # history-API navigation
    wait_idle(page)
    query = parse_qs(urlparse(page.url).query)
    assert query["prompt"] == [PROMPT] and query["temperature"] == ["0.2"]
    assert PROMPT in main_text(page)


def test_prompt_typed_in_the_sidebar_follows_the_next_link(app_url, page):
    open_page(page, app_url, "request")
    box = page.get_by_test_id("stSidebar").get_by_role("textbox", name="Prompt", exact=True)
    expect(box).to_have_value(DEFAULT_PROMPT)
    box.fill("Name three primary colours.")
    box.press("Control+Enter")
    expect(page.get_by_test_id("stMainBlockContainer")).to_contain_text("Name three primary colours.")
    page.get_by_test_id("stPageLink").filter(has_text="Next: Gateway").click()
    expect(page).to_have_url(re.compile(r"/gateway\?"), timeout=PAGE_TIMEOUT_MS)
    wait_idle(page)
    assert "Name three primary colours." in main_text(page)
    assert parse_qs(urlparse(page.url).query)["prompt"] == ["Name three primary colours."]


@pytest.mark.parametrize("url_path", ["", "tokenization"])
def test_html_in_the_prompt_never_runs(app_url, page, url_path):
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    open_page(page, app_url, url_path, prompt=HOSTILE)
    page.wait_for_timeout(500)
    assert HOSTILE in main_text(page)
    assert dialogs == []
    expect(page.locator(EXCEPTION)).to_have_count(0)


def test_out_of_range_link_value_gets_a_message(app_url, page):
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=9)
    expect(page.get_by_test_id("stAlert").filter(has_text="temperature='9'")).to_be_visible()
    expect(page.locator(EXCEPTION)).to_have_count(0)


def test_two_browsers_never_see_each_others_prompt(app_url, browser):
    first, second = browser.new_context(), browser.new_context()
    try:
        mine, theirs = first.new_page(), second.new_page()
        open_page(mine, app_url, "tokenization")
        box = mine.get_by_test_id("stSidebar").get_by_role("textbox", name="Prompt", exact=True)
        box.fill("A private question about my tax return.")
        box.press("Control+Enter")
        expect(mine.get_by_test_id("stMainBlockContainer")).to_contain_text("A private question")
        open_page(theirs, app_url, "tokenization")
        assert DEFAULT_PROMPT in main_text(theirs)
        assert "private question" not in theirs.content()
    finally:
        first.close()
        second.close()
