"""A real browser works the Generation, KV cache and Streaming pages' replays (ui/live_replay.js): each control
redraws its figure in the browser with no script run, and how fast the figures redraw is measured.

Redraw times (click or key press to the next animation frame after the SVG was updated) and each replay's
payload go to screenshots/instant-generation.json, which the bench prints (bench/browser_timings.py); they are
figures, not assertions (the pages' open times are the bench's own). The texts and bars the browser
draws are checked against the data the page sent. That each replay leads its page and stays legible at
every size, in presenter mode too, is test_legibility's check of every page.
"""

from __future__ import annotations

import json
import statistics

import pytest
from playwright.sync_api import expect

from bench.browser_timings import INSTANT_FILE
from tests.browser.app_page import EXCEPTION, POLL_MS, wait_idle
from tests.browser.conftest import PAGE_TIMEOUT_MS

pytestmark = pytest.mark.browser

PROMPT = "What's the capital of India?"
SETTINGS = {"prompt": PROMPT, "temperature": 0, "max_tokens": 48}
MOVES = 4

# Counts every script run the page starts from now on: the app's state attribute turning "running".
_WATCH_RUNS = """() => {
  window.scriptRuns = 0;
  const app = document.querySelector('[data-testid="stApp"]');
  new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.scriptRuns++;
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
  window.pressed = null;
  for (const kind of ['pointerdown', 'keydown']) {
    document.addEventListener(kind, () => { window.pressed = performance.now(); }, {capture: true});
  }
}"""

# What the replay shows now: its readout, each SVG's markup and which step the slider is at.
_SHOWN = """root => ({readout: root.querySelector('.lr-readout').textContent,
                     svgs: [...root.querySelectorAll('svg')].map(s => s.innerHTML),
                     index: Number(root.dataset.index), slider: root.querySelector('input[type=range]').value})"""

def _replay(page, name: str):
    return page.locator(f".live-replay-{name}")


def _opened(page, app_url: str, url_path: str, figures: dict) -> None:
    """Open the page until its replay is drawn and the page is idle, and record the replay's payload (the pages'
    open times are the bench's: page_open_rows)."""
    page.goto(f"{app_url}/{url_path}?" + "&".join(f"{k}={v}" for k, v in SETTINGS.items()))
    page.wait_for_selector(".live-replay[data-draws]", timeout=PAGE_TIMEOUT_MS)  # a fresh server loads the model
    wait_idle(page)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    figures["payload_bytes"][url_path] = page.locator(".live-replay").evaluate(
        "root => JSON.stringify(root.liveData).length")


def _move(page, root, control) -> tuple[float, dict]:
    """Work ``control`` once; the redraw time (ms) and what the replay shows after it."""
    draws = int(root.get_attribute("data-draws") or 0)
    control()
    page.wait_for_function("([root, draws]) => Number(root.dataset.draws) > draws", arg=[root.element_handle(), draws],
                           polling=POLL_MS)
    took = root.evaluate("root => Number(root.dataset.drawnAt) - window.pressed")
    return took, root.evaluate(_SHOWN)


def _moved_without_a_run(page, root, controls) -> list[float]:
    """Work each control; every one must change the figure, and none may start a script run."""
    page.evaluate(_WATCH_RUNS)
    times, before = [], root.evaluate(_SHOWN)
    for control in controls:
        took, after = _move(page, root, control)
        assert after["readout"] != before["readout"] and after["svgs"] != before["svgs"], "the figure did not change"
        assert after["slider"] == str(after["index"])
        times.append(took)
        before = after
    page.wait_for_timeout(600)  # a run the controls started would have begun by now
    assert page.evaluate("window.scriptRuns") == 0, "a control started a script run"
    return times


def test_every_control_redraws_in_the_browser_without_a_script_run(app_url, page, screenshots):
    figures: dict = {"prompt": PROMPT, "redraw_ms": {}, "payload_bytes": {}}
    _opened(page, app_url, "generation", figures)
    root = _replay(page, "generation")
    data = root.evaluate("root => root.liveData")
    buttons = root.locator(".lr-controls")
    next_button = buttons.get_by_role("button", name="Next token ▶")
    steps = [next_button.click] * MOVES + [buttons.get_by_role("button", name="⏭ Last step").click,
                                            buttons.get_by_role("button", name="◀ Back").click]
    times = _moved_without_a_run(page, root, steps)
    shown = root.evaluate(_SHOWN)
    last = len(data["tokens"]) - 1
    assert shown["index"] == last - 1
    assert shown["readout"].startswith(f"Step {last} of {last + 1}: {data['tokens'][last - 1]}")
    answer = root.locator(".lr-answer").evaluate(
        "box => [...box.querySelectorAll('.lr-token')].filter(s => !s.hidden).map(s => s.textContent).join('')")
    assert answer == "".join(data["deltas"][:last])  # the answer so far: the steps up to this one
    slider = root.locator("input[type=range]")
    slider.focus()
    times += _moved_without_a_run(page, root, [lambda: slider.press("ArrowLeft")] * MOVES)
    figures["redraw_ms"]["generation"] = times

    _opened(page, app_url, "kv-cache", figures)
    root = _replay(page, "kv")
    data = root.evaluate("root => root.liveData")
    more = root.get_by_role("button", name="More ▶")
    jumps = root.locator(".lr-controls")
    times = _moved_without_a_run(page, root, [more.click] * MOVES + [
        jumps.get_by_role("button", name=f"full window ({data['window']:,})").click])
    per_token = data["layers"] * data["kv_heads"] * data["head_dim"] * 2 * data["bytes_per_number"]
    window_bytes = per_token * data["window"]
    assert f"At {data['window']:,} positions the cache holds {window_bytes / 2**20:,.2f} MiB" in root.evaluate(_SHOWN)["readout"]
    figures["redraw_ms"]["kv-cache"] = times

    _opened(page, app_url, "streaming", figures)
    root = _replay(page, "stream")
    data = root.evaluate("root => root.liveData")
    back = root.get_by_role("button", name="◀ Back")
    times = _moved_without_a_run(page, root, [back.click] * MOVES)
    assert root.evaluate(_SHOWN)["readout"].startswith(f"Event {len(data['at']) - MOVES} of {len(data['at'])}")
    figures["redraw_ms"]["streaming"] = times
    page.evaluate(_WATCH_RUNS)
    root.get_by_role("button", name="⏮ First").click()
    root.get_by_role("button", name="▶ Play").click()  # the stream on its own clock
    page.wait_for_function("root => Number(root.dataset.index) === root.liveData.at.length - 1",
                           arg=root.element_handle(), timeout=30_000, polling=POLL_MS)
    assert root.locator(".lr-answer").inner_text() == "".join(data["text"])
    assert page.evaluate("window.scriptRuns") == 0

    medians = {name: round(statistics.median(values), 1) for name, values in figures["redraw_ms"].items()}
    figures["redraw_median_ms"] = medians
    figures["redraw_ms"] = {name: [round(t, 1) for t in values] for name, values in figures["redraw_ms"].items()}
    figures["measures"] = ("redraw: click or key press to the next animation frame after the replay's SVG was "
                           "updated (performance.now() in the page); payload: JSON characters of the replay's data")
    (screenshots / INSTANT_FILE).write_text(json.dumps(figures, indent=1) + "\n")
    print(f"\n{json.dumps(figures)}")
    assert all(t > 0 for values in figures["redraw_ms"].values() for t in values)
