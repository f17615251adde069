"""The Forward pass page's step tabs in a real browser: the page opens with its live block alone, builds the tabs in
a second run of their fragment alone once the browser is idle, and from then on a tab click is the browser's
alone (no script run of any kind); the RoPE slider keeps its value when its tab is left and shown again.

The runs are read off the websocket: every BackMsg the browser sends is decoded with Streamlit's own protobufs,
so "a fragment run, not the page" is what the browser asked the server for (``fragment_id`` set), not a guess
from the DOM. Tab click times (click to the tab's charts shown, the browser's clock) are printed, not asserted:
bench/browser_timings.py's forward_tab_rows measures them for `make bench`.
"""

from __future__ import annotations

import statistics

import pytest
from playwright.sync_api import expect
from streamlit.proto.BackMsg_pb2 import BackMsg

from bench.browser_timings import STEPS_FILLED, click_tab
from tests.browser.app_page import EXCEPTION, open_page, wait_idle, wait_still
from tests.browser.layout import chart_text_problems
from tests.browser.streamlit_socket import FRAGMENT_FINISHED, Socket
from tests.browser.test_instant_controls import _WATCH_RUNS
from ui.frame import SETTINGS_LATER
from ui.when_idle import RETELLS

pytestmark = pytest.mark.browser

PROMPT = "What's the capital of India?"
TABS = ["1. RMSNorm", "2. Q, K, V and RoPE", "3. Scores and softmax", "4. Attention output", "5. The MLP",
        "6. Block output", "Logit lens"]
FILL_KEY = "forward_fill"  # views/forward_pass.py's ui.when_idle
SIZES = {"laptop": (1366, 768), "projector": (1024, 768), "phone": (390, 844)}


def _told(rerun: BackMsg, key: str) -> str | None:
    """The value a ui.when_idle component under ``key`` had told when the browser asked for this run (None: not yet)."""
    for state in rerun.rerun_script.widget_states.widgets:
        kind = state.WhichOneof("value")
        if state.id.endswith(key) and kind:
            return str(getattr(state, kind))
    return None


def _summary(reruns: list[BackMsg]) -> list[tuple[str, str | None, str | None]]:
    return [("fragment" if m.rerun_script.fragment_id else "page", _told(m, SETTINGS_LATER), _told(m, FILL_KEY))
            for m in reruns]


def test_the_step_tabs_fill_in_once_then_switch_without_a_run(app_url, page):
    socket = Socket(page)
    open_page(page, app_url, "forward-pass", prompt=PROMPT, temperature=0)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    page.wait_for_function(STEPS_FILLED, polling=20)
    wait_idle(page)
    # The tabs were filled by one run of their fragment alone, asked for by the idle component; the page ran as a
    # page twice: the deep link, and the run that draws the settings widgets, which the frame asks for once the
    # page is drawn (ui/frame.py), before or after the fragment's (the two tells race). A tell still unanswered after
    # ui.when_idle.STUCK_MS is told again with a new value (on a loaded machine the server can take that long), and
    # its run is then one more: every page run but the deep link's carries a tell of its own.
    reruns = socket.reruns()
    fragment_runs = [m for m in reruns if m.rerun_script.fragment_id]
    page_runs = [m for m in reruns if not m.rerun_script.fragment_id]
    tells = {_told(m, SETTINGS_LATER) for m in page_runs[1:]}
    assert len(fragment_runs) == 1 and _told(fragment_runs[0], FILL_KEY) is not None, _summary(reruns)
    assert _told(page_runs[0], SETTINGS_LATER) is None and None not in tells, _summary(reruns)
    assert len(page_runs) == 1 + len(tells) and len(tells) <= 1 + RETELLS, _summary(reruns)
    assert FRAGMENT_FINISHED in socket.finished()
    tabs = page.get_by_test_id("stMain").get_by_test_id("stTab")
    assert tabs.all_inner_texts() == TABS

    # Every tab, shown in turn, holds its drawn charts, and no click starts a run or sends the server anything.
    page.evaluate(_WATCH_RUNS)
    sent = len(socket.sent)
    times = [click_tab(page, index)[0] for index in [*range(1, len(TABS)), 0]]
    page.wait_for_timeout(500)
    assert page.evaluate("() => window.scriptRuns") == 0, "a tab click ran the script"
    assert len(socket.sent) == sent, "a tab click sent the server a message"
    print(f"\nForward pass tab click -> charts shown (ms): {[round(t, 1) for t in times]}, "
          f"median {statistics.median(times):.1f}")


def test_the_rope_pair_slider_keeps_its_value_when_its_tab_is_left(app_url, page):
    socket = Socket(page)
    open_page(page, app_url, "forward-pass", prompt=PROMPT, temperature=0)
    page.wait_for_function(STEPS_FILLED, polling=20)
    wait_idle(page)
    main = page.get_by_test_id("stMain")
    main.get_by_role("tab", name=TABS[1]).click()
    slider = main.get_by_role("slider", name="Dimension pair")
    runs = len(socket.reruns())
    slider.focus()
    for _ in range(3):
        slider.press("ArrowRight")
    expect(slider).to_have_value("3")
    rope = main.get_by_test_id("stTabPanel").nth(1)
    expect(rope).to_contain_text("pair (3, 35)")
    wait_idle(page)
    # The slider's runs are the fragment's alone: the live block and the rest of the page are not run again.
    moved = socket.reruns()[runs:]
    assert moved and all(m.rerun_script.fragment_id for m in moved)
    for name in (TABS[2], TABS[6], TABS[1]):
        main.get_by_role("tab", name=name).click()
    expect(slider).to_have_value("3")
    expect(rope).to_contain_text("pair (3, 35)")
    assert len(socket.reruns()) == runs + len(moved)  # the tab clicks ran nothing


def test_every_step_tab_is_legible(app_url, page, screenshots):
    """One page resized to each size's width, each tab shown in turn (a hidden tab's charts have no size to
    check): no chart label overlaps another or leaves its chart; each tab's panel is saved for a person to look
    at."""
    width, height = SIZES["laptop"]
    page.set_viewport_size({"width": width, "height": height})
    problems = {}
    open_page(page, app_url, "forward-pass", prompt=PROMPT, temperature=0)
    page.wait_for_function(STEPS_FILLED, polling=20)
    wait_idle(page)
    panels = page.get_by_test_id("stMain").get_by_test_id("stTabPanel")
    for size, (width, _) in SIZES.items():
        # Streamlit scrolls inside its main block: a tall window, so a whole panel fits in its screenshot. The
        # charts' sizes follow the window's width alone, so their labels are checked at this height too.
        page.set_viewport_size({"width": width, "height": 2400})
        folder = screenshots / size
        folder.mkdir(exist_ok=True)
        for index, name in enumerate(TABS):
            click_tab(page, index)
            wait_still(page)
            found = chart_text_problems(page)
            if found:
                problems[f"{size}: {name}"] = found
            panels.nth(index).screenshot(path=folder / f"forward-pass-tab-{index + 1}.png")
    assert problems == {}
