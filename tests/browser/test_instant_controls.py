"""The Attention, Forward pass, Next token and Embeddings pages' controls redraw their figures in the browser,
without a Streamlit script run, the Embeddings word list and the Context window page's controls rerun only their
own fragment, and how fast is measured.

Each control (layer, head, query token; layer, query head) is moved a few steps; each step must be redrawn by the
control's own handler in the browser (the component counts those redraws apart from new data a script run brings)
and change what the component drew (its ``data-shown``). On the Attention page the app's script state never turns
to "running"; the Forward pass block sends its (layer, head) to Python once the controls rest, so its step tabs
follow. The redraw time (the control's input event to the next animation frame after the component updated its
SVG) and each live figure's payload are written to screenshots/instant-controls.json, the fragments' times to
screenshots/instant-fragments.json, which bench/browser_timings.py reads: figures, not assertions (the pages'
open times are the bench's own: page_open_rows). That the live figures lead their pages and stay
legible at every size is test_legibility's check of every page.
"""

from __future__ import annotations

import fcntl
import json
import re
import statistics

import pytest
from playwright.sync_api import expect

from bench.browser_timings import INSTANT_CONTROLS_FILE, INSTANT_FRAGMENTS_FILE, STEPS_FILLED
from tests.browser.app_page import CHARTS_DRAWN, EXCEPTION, POLL_MS, open_page, wait_idle
from tests.browser.conftest import SCREENSHOTS
from tests.browser.streamlit_socket import FRAGMENT_FINISHED, Socket

pytestmark = pytest.mark.browser

PROMPT = "What's the capital of India?"
LIVE = {"attention": ".live-attention", "forward-pass": ".live-block"}
SENDS_WHEN_RESTING = {"forward-pass"}  # ui/live_block.js's scheduleSend
STEPS = 5

# Counts every script run from now on: the app marks its root "running" while a script runs.
_WATCH_RUNS = """() => {
  window.scriptRuns = 0;
  const app = document.querySelector('[data-testid="stApp"]');
  new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.scriptRuns += 1;
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
  window.redraw = {at: null};
  document.addEventListener('input', () => { window.redraw = {at: performance.now()}; }, {capture: true});
  document.addEventListener('keydown', () => { window.redraw = {at: performance.now()}; }, {capture: true});
}"""

def _step(page, selector: str, move) -> float:
    """Do ``move``, wait for the component's next redraw by that control (in the browser: new data from a script
    run never counts as one); the redraw time in ms."""
    live = page.locator(selector)
    draws = int(live.get_attribute("data-control-draws") or 0)
    shown = live.get_attribute("data-shown")
    move()
    page.wait_for_function(f"() => Number(document.querySelector('{selector}').dataset.controlDraws) > {draws}",
                           polling=POLL_MS)
    assert live.get_attribute("data-shown") != shown, "the figure must change"
    return live.evaluate("root => Number(root.dataset.controlDrawnAt) - window.redraw.at")


def _moves(live, name: str, count: int):
    """``count`` moves of the control ``name``: arrow keys on a slider (leftwards from its end), the next options
    of a select."""
    control = live.locator(f'[data-control="{name}"]')
    if live.locator(f'input[data-control="{name}"]').count():
        control.focus()
        at_end = control.evaluate("input => Number(input.value) + 5 > Number(input.max)")
        return [lambda: control.press("ArrowLeft" if at_end else "ArrowRight")] * count
    values = control.locator("option").evaluate_all("options => options.map(o => o.value)")
    current = control.input_value()
    start = values.index(current)
    picks = [values[(start + i + 1) % len(values)] for i in range(count)]
    return [lambda value=value: control.select_option(value) for value in picks]


def _measure(page, url_path: str, controls: list[str]) -> dict:
    live = page.locator(LIVE[url_path])
    page.wait_for_function(f"() => Number(document.querySelector('{LIVE[url_path]}')?.dataset.draws) > 0",
                           polling=POLL_MS)
    page.evaluate(_WATCH_RUNS)
    measured = {}
    for name in controls:
        times = [_step(page, LIVE[url_path], move) for move in _moves(live, name, STEPS)]
        # Only the Forward pass block sends its (layer, head) back to Python, once the controls rest (350 ms), so
        # its step tabs follow; under load a step can take that long. The attention maps never run the script.
        if url_path not in SENDS_WHEN_RESTING:
            assert page.evaluate("() => window.scriptRuns") == 0, f"moving {name} ran the page's script"
        measured[name] = {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1),
                          "steps": len(times)}
        page.wait_for_timeout(700)
        wait_idle(page)
        page.evaluate("() => { window.scriptRuns = 0; }")
    return measured


def _payload(page, url_path: str) -> int:
    """Characters of the JSON the page sent its live figure."""
    return page.locator(LIVE[url_path]).evaluate("root => JSON.stringify(root.liveData).length")


# The live maps' first drawing, and which layers the data it was drawn from held.
_FIRST_MAPS = """() => document.addEventListener('DOMContentLoaded', () => new MutationObserver((_, observer) => {
  const root = document.querySelector('.live-attention');
  if (!root || !root.dataset.shown) return;
  window.firstMaps = {shown: JSON.parse(root.dataset.shown), onlyLayer: root.liveData.only_layer ?? null};
  observer.disconnect();
}).observe(document.body, {childList: true, subtree: true, attributes: true}))"""


# On the live maps' first drawing, from the start layer alone: choose the next layer at once, before the run that
# brings every layer, and keep what the maps showed then.
_LAYER_BEFORE_THE_MAPS = """() => document.addEventListener('DOMContentLoaded', () => new MutationObserver((_, observer) => {
  const root = document.querySelector('.live-attention');
  if (!root || !root.dataset.shown) return;
  observer.disconnect();
  const input = root.querySelector('input[data-control="layer"]');
  const onlyLayer = root.liveData.only_layer ?? null;
  input.value = String((Number(input.value) + 1) % root.liveData.layers);
  input.dispatchEvent(new Event('input', {bubbles: true}));
  window.moved = {onlyLayer, layer: Number(input.value), shown: JSON.parse(root.dataset.shown)};
}).observe(document.body, {childList: true, subtree: true, attributes: true}))"""


def test_a_layer_chosen_before_every_layer_arrives_is_drawn_when_it_does(app_url, page):
    page.add_init_script(f"({_LAYER_BEFORE_THE_MAPS})()")
    open_page(page, app_url, "attention", prompt=PROMPT, temperature=0)
    moved = page.evaluate("window.moved")
    assert moved["onlyLayer"] == moved["shown"]["layer"] != moved["layer"]  # the maps stayed at the start layer
    shown = json.loads(page.locator(LIVE["attention"]).get_attribute("data-shown"))
    assert shown["layer"] == moved["layer"] and shown["query"] == moved["shown"]["query"]
    assert page.locator(LIVE["attention"]).evaluate("root => root.liveData.only_layer ?? null") is None
    assert abs(sum(shown["row"]) - 1) < 1e-3 and shown["row"] != moved["shown"]["row"]


def test_attention_forward_pass_and_next_token_controls_redraw_in_the_browser(app_url, page):
    page.add_init_script(f"({_FIRST_MAPS})()")
    open_page(page, app_url, "attention", prompt=PROMPT, temperature=0)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    # A new tab's first run sent the start layer alone and the maps were drawn from it; the run after it brought
    # every layer, and the same view drawn from those is the same.
    first = page.evaluate("window.firstMaps")
    full = page.locator(LIVE["attention"]).evaluate("root => ({shown: JSON.parse(root.dataset.shown), "
                                                    "onlyLayer: root.liveData.only_layer ?? null})")
    assert first["onlyLayer"] == first["shown"]["layer"] and full["onlyLayer"] is None
    assert first["shown"] == full["shown"]
    payloads = {"attention": _payload(page, "attention")}
    attention = _measure(page, "attention", ["layer", "head", "query"])
    # The redrawn map is the data's: the drawn row is the chosen (layer, head, query)'s decoded weights.
    shown = json.loads(page.locator(LIVE["attention"]).get_attribute("data-shown"))
    assert abs(sum(shown["row"]) - 1) < 1e-3 and len(shown["row"]) == shown["query"] + 1

    open_page(page, app_url, "forward-pass", prompt=PROMPT, temperature=0)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    # The page's own second run (its step tabs built once the browser is idle) is not a control's run.
    page.wait_for_function(STEPS_FILLED, polling=20)
    wait_idle(page)
    live = page.locator(LIVE["forward-pass"])
    caption = page.locator("[data-testid^=stCaption]").filter(has_text="The steps below open block")
    before = caption.inner_text()
    payloads["forward-pass"] = _payload(page, "forward-pass")
    forward = _measure(page, "forward-pass", ["layer", "head", "token"])
    # Once the controls rested, the page's details followed the block drawn above, at the token drawn.
    drawn = json.loads(live.get_attribute("data-shown"))
    token = live.locator("output[for$=-token]").inner_text()
    expect(caption).to_contain_text(f"open block {drawn['layer']} at head {drawn['head']} for token")
    assert caption.inner_text() != before
    expect(page.get_by_test_id("stMarkdownContainer").filter(has_text="pass through")).to_contain_text(
        f"position {drawn['position']}")  # the lesson speaks of the token chosen in the block
    assert token.split(":", 1)[0].strip() == str(drawn["position"])

    scale = _next_token_scale(page, app_url)

    controls = ({f"attention.{k}": v for k, v in attention.items()} | {f"forward-pass.{k}": v for k, v in forward.items()}
                | {"next-token.scale": scale})
    _record_controls(controls, payloads)
    assert all(v["median_ms"] > 0 for v in controls.values())


def _record_controls(controls: dict[str, dict], payloads: dict[str, int]) -> None:
    """Merge these controls' redraw times and these pages' payloads into INSTANT_CONTROLS_FILE, under a lock (two
    tests write it, and xdist workers may run them at once)."""
    def merge(record: dict) -> None:
        record["controls"] = record.get("controls", {}) | controls
        record["payload_kib"] = record.get("payload_kib", {}) | {page: round(n / 1024, 1) for page, n in payloads.items()}
        record["measures"] = ("control input event to the next animation frame after the component updated its "
                              "figure (median of the steps); payload: the JSON the page sent its live figure")
    print(f"\ninstant controls: {json.dumps(_merged(INSTANT_CONTROLS_FILE, merge))}")


def _next_token_scale(page, app_url: str) -> dict:
    """The Next token page's "Show" buttons switch its bars between probability and log-probability in the
    browser (ui/live_bars.js): no script run, and the axis follows. Pressed from the keyboard, so the redraw is
    timed from the key, as a slider's step is."""
    open_page(page, app_url, "next-token", prompt=PROMPT, temperature=0)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    wait_idle(page)
    bars = page.locator(".live-bars").first
    page.evaluate(_WATCH_RUNS)
    times = []
    for view in ("log-probability", "probability") * 2:
        button = bars.locator(f'button[data-view="{view}"]')
        button.focus()
        times.append(_step(page, ".live-bars", lambda: button.press("Enter")))
        expect(bars.locator(".lb-axis")).to_contain_text("Log-probability" if view == "log-probability" else "Probability")
        expect(button).to_have_attribute("aria-checked", "true")
    assert page.evaluate("() => window.scriptRuns") == 0, "switching the scale ran the page's script"
    return {"median_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1), "steps": len(times)}


def _fragment_run(page, socket: Socket, act) -> float:
    """Do ``act``; the ms from it to its run's end arriving, which must have been a run of a fragment alone (what
    the browser asked for and what the server answered, off the websocket)."""
    asked, seconds, status = socket.run_after(act)
    assert all(m.rerun_script.fragment_id for m in asked), "the whole page ran again"
    assert status == FRAGMENT_FINISHED
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    return seconds * 1000


def _opened(page, app_url: str, url_path: str):
    """The page opened for PROMPT, drawn and idle, with its websocket watched from the start: (the socket, the
    page's main block)."""
    socket = Socket(page)
    open_page(page, app_url, url_path, prompt=PROMPT, temperature=0)
    page.wait_for_function(CHARTS_DRAWN, polling=POLL_MS)
    wait_idle(page)
    return socket, page.get_by_test_id("stMainBlockContainer")


WORD_LISTS = ("king, queen, man, woman", "cat, dog, car, bus", "red, green, blue, yellow", "Paris, London, Tokyo, Rome",
              "apple, bread, cheese, soup")


def test_the_embeddings_slider_redraws_in_the_browser_and_the_words_rerun_their_fragment(app_url, page):
    """The strip's "Dimensions shown" slider redraws in the browser (ui/live_strip.js) with no script run; the word
    list reruns only its own fragment (a server round trip, no model run): the browser asks for the fragment's run
    and the server ends it as one, never the page's. The times go to INSTANT_CONTROLS_FILE and
    INSTANT_FRAGMENTS_FILE."""
    socket, main = _opened(page, app_url, "embeddings")
    strip = page.locator(".live-strip")
    slider = strip.locator('input[data-control="dims"]')
    shown = slider.input_value()
    page.evaluate(_WATCH_RUNS)
    steps = []
    for key in ["ArrowRight"] * 3 + ["ArrowLeft"] * 3:
        slider.focus()
        steps.append(_step(page, ".live-strip", lambda key=key: slider.press(key)))
    assert slider.input_value() == shown  # three steps up and three down
    assert page.evaluate("() => window.scriptRuns") == 0, "the slider ran the page's script"
    expect(strip.locator(".ls-axis")).to_contain_text(f"first {shown} of")
    payload = strip.evaluate("root => JSON.stringify(root.liveData).length")
    box = main.get_by_test_id("stTextInput").filter(has_text="Words to compare").locator("input")
    words = []
    # Five lists: a median of two moved across the 150 ms line from one bench run to the next (119.8, then 156.1 ms).
    for typed in WORD_LISTS:
        box.fill(typed)
        words.append(_fragment_run(page, socket, lambda: box.press("Enter")))
        wait_idle(page)
        expect(main.get_by_test_id("stPlotlyChart").last).to_contain_text(typed.split(", ")[-1])
    _record_controls({"embeddings.dimensions": {"median_ms": round(statistics.median(steps), 1),
                                                "max_ms": round(max(steps), 1), "steps": len(steps)}},
                     {"embeddings": payload})
    _record_fragments({"embeddings.words": words})


def test_the_context_window_controls_rerun_their_fragment_alone(app_url, page):
    """The budget's window choice and the overflow demo's small window each rerun their own fragment alone; the
    chart follows the window, the demo its cut. The times go to INSTANT_FRAGMENTS_FILE."""
    socket, main = _opened(page, app_url, "context-window")
    budget = main.locator(".live-bars").first
    windows = []
    for size in ("32,768", "128,000", "8,192"):
        choice = main.get_by_test_id("stRadio").get_by_text(re.compile(rf"preset \({size}\)"))
        windows.append(_fragment_run(page, socket, choice.click))
        wait_idle(page)
        expect(budget).to_contain_text(f"window {size}")
    box = main.get_by_test_id("stNumberInput").filter(has_text="Small window for the demo").locator("input")
    box.fill("128")
    overflow = [_fragment_run(page, socket, lambda: box.press("Enter"))]
    wait_idle(page)
    expect(main).to_contain_text("Dropped messages")
    _record_fragments({"context-window.window": windows, "context-window.overflow": overflow})


def _record_fragments(times: dict[str, list[float]]) -> None:
    """Merge these controls' median times into INSTANT_FRAGMENTS_FILE: each fragment test writes its own controls."""
    def merge(record: dict) -> None:
        record |= {name: {"median_ms": round(statistics.median(ms), 1), "steps": len(ms)} for name, ms in times.items()}
        record["measures"] = "control event to its fragment run's end arriving on the websocket (a server round trip)"
    print(f"\ninstant fragments: {json.dumps(_merged(INSTANT_FRAGMENTS_FILE, merge))}")


def _merged(name: str, merge) -> dict:
    """The JSON record in SCREENSHOTS / ``name`` after ``merge`` changed it in place, written back under a lock."""
    path = SCREENSHOTS / name
    path.parent.mkdir(exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = json.loads(path.read_text()) if path.exists() else {}
        merge(record)
        path.write_text(json.dumps(record, indent=1) + "\n")
    return record
