"""The bench's simulated browser sessions really drive `streamlit run app.py` through Streamlit's websocket."""

from __future__ import annotations


import pytest

from bench.sessions import RoomReport, class_prompts, missing_title, room, visit
from tests.conftest import run_coroutine

pytestmark = pytest.mark.browser


def test_a_session_opens_the_page_it_asks_for_and_waits_until_it_is_finished(app_url):
    result = run_coroutine(visit(app_url, "next-token", {"prompt": "Why is salt salty?", "max_tokens": 4}))
    assert result.finished and result.runs >= 1, result
    assert result.headings[0] == "Next token" and "Top 15 candidates" in result.headings
    assert not result.exceptions and not result.errors and not missing_title(result)


def test_a_session_asks_for_the_details_run_a_browser_asks_for_once_the_picture_is_drawn(app_url):
    """The Generation page holds its details back until the browser has drawn its replay (ui.when_idle): the
    session then asks for that run, as chromium does, and the page is finished only after it. A page with no
    details (Failures) asks for one run too in a new session: the one that draws the settings widgets."""
    result = run_coroutine(visit(app_url, "generation", {"prompt": "Why is salt salty?", "max_tokens": 4}))
    assert result.finished and result.told_drawn == 1 and result.runs >= 2, result
    assert not result.exceptions and not result.errors and not missing_title(result)
    plain = run_coroutine(visit(app_url, "failures", {"prompt": "Why is salt salty?", "max_tokens": 4}))
    assert plain.finished and (plain.runs, plain.told_drawn) == (2, 1), plain
    assert not plain.exceptions and not plain.errors and not missing_title(plain)


def test_an_error_box_on_the_page_is_reported(app_url):
    result = run_coroutine(visit(app_url, "next-token", {"prompt": "word " * 4000, "max_tokens": 4}))
    assert result.finished and not result.exceptions
    assert any("tokens" in error for error in result.errors), result.errors


def test_a_small_room_opens_next_token_then_generation_without_an_exception(app_url):
    """The bench's room at a size CI affords: eight sessions with distinct prompts on the server started as
    the README starts it, every page finished with no exception or error box, and the pages that had to
    wait for the model said where they were (the bench runs 30, 60 and 100 sessions)."""
    prompts = class_prompts(8)
    for page in ("next-token", "generation"):
        visits = run_coroutine(room(app_url, page, prompts, {"max_tokens": 3}))
        assert [v.prompt for v in visits] == prompts and len(set(prompts)) == 8
        assert all(v.finished and not v.exceptions and not v.errors and not missing_title(v) for v in visits), visits
        report = RoomReport(len(prompts), {page: visits}, peak_rss=0, pages_ready_seconds=0.0)
        assert not report.silent_waits, [v.waits for v in report.silent_waits]
