"""A real browser moves the Sampling page's live sliders: the chart is redrawn in the browser, its numbers
are Python's, the rest of the page follows, and how fast the chart redraws is measured.

The redraw time (key press on the slider to the chart redrawn, the next animation frame after the
component updated its SVG) is written to screenshots/slider-latency.json, which `make bench` prints;
it is a figure, not an assertion.
"""

from __future__ import annotations

import base64
import json
import statistics

import numpy as np
import pytest
from playwright.sync_api import expect

from bench.browser import SLIDER_LATENCY_FILE
from lifecycle.stages.sampling import KEPT, SamplingSettings, apply_sampling
from tests.browser.app_page import EXCEPTION, POLL_MS, full_screenshot, open_page, wait_idle
from tests.browser.layout import _outside, _overlap

pytestmark = pytest.mark.browser

PROMPT = "The capital of France is"
STEPS = 8
LIVE = ".live-sampling"
SIZES = {"laptop": (1366, 768), "projector": (1024, 768), "phone": (390, 844)}

# Each combination makes its stage remove tokens (checked in Python before comparing), so a transform
# that skipped or misordered a stage would give other probabilities.
COMBINATIONS = [
    ({"temperature": 0.7, "top_k": 0, "top_p": 1.0, "min_p": 0.0}, None),
    ({"temperature": 1.3, "top_k": 40, "top_p": 1.0, "min_p": 0.0}, "top_k"),
    ({"temperature": 1.0, "top_k": 0, "top_p": 0.9, "min_p": 0.0}, "top_p"),
    ({"temperature": 1.5, "top_k": 0, "top_p": 1.0, "min_p": 0.05}, "min_p"),
    ({"temperature": 2.0, "top_k": 500, "top_p": 0.95, "min_p": 0.3}, "min_p"),
    ({"temperature": 0.35, "top_k": 10, "top_p": 0.5, "min_p": 0.0}, "top_p"),
    ({"temperature": 0.05, "top_k": 0, "top_p": 1.0, "min_p": 0.0}, None),  # probabilities near underflow
    ({"temperature": 0.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0}, "temperature"),
]

_SET = """(root, settings) => {
  const choices = root.liveData.knobs.top_k.choices;
  for (const [knob, value] of Object.entries(settings)) {
    const input = root.querySelector(`input[data-knob="${knob}"]`);
    input.value = String(knob === 'top_k' ? choices.indexOf(value) : value);
  }
  root.querySelector('input[data-knob="temperature"]').dispatchEvent(new Event('input', {bubbles: true}));
  return JSON.parse(root.dataset.probabilities);
}"""

# Every text of the live chart's SVG as the four corners of its box on screen, with the SVG's box.
_LIVE_TEXTS = """(root) => {
  const chart = root.querySelector('svg.ls-chart');
  const area = chart.getBoundingClientRect();
  const texts = [...chart.querySelectorAll('text')].filter(t => t.textContent.trim() !== '').map(t => {
    const b = t.getBoundingClientRect();
    return {text: t.textContent, corners: [[b.left, b.top], [b.right, b.top], [b.right, b.bottom], [b.left, b.bottom]]};
  });
  const cut = [...root.querySelectorAll('.ls-knob label')].filter(l => l.scrollWidth > l.clientWidth + 1)
    .map(l => l.textContent);
  return {area: {left: area.left, right: area.right, top: area.top, bottom: area.bottom}, texts, cut,
          width: area.width, page: document.documentElement.clientWidth};
}"""


def metric(page, label: str) -> str:
    return page.get_by_test_id("stMetric").filter(has_text=label).get_by_test_id("stMetricValue").inner_text()


def _live(page):
    return page.locator(LIVE)


def _thumb(page, knob: str = "temperature"):
    return _live(page).locator(f'input[data-knob="{knob}"]')


def _wait_python_has(page, knob: str, value: str) -> None:
    """Until a run has drawn the chart having seen the browser's last send, with ``knob`` at ``value``, and ended.
    A rerun for a step sent midway can end before the last step's send reaches the server: waiting for the page to
    be idle alone would read that run's numbers."""
    page.wait_for_function(
        """([selector, knob, value]) => {
          const root = document.querySelector(selector);
          const seen = root.liveData.seen_sent_at, sent = root.liveState.sentAt;
          return sent != null && seen === sent && String(root.liveData.settings[knob]) === value;
        }""", arg=[LIVE, knob, value], polling=POLL_MS)
    wait_idle(page)


_SENT = "root => ({logits: root.liveData.logits, dtype: root.liveData.dtype, moved: root.liveData.moved})"
# The data the browser holds and its transform at ``settings``, read in one task: no rerun comes in between.
_SENT_AND_SET = f"(root, settings) => ({{sent: ({_SENT})(root), computed: ({_SET})(root, settings)}})"


def _logits(page) -> np.ndarray:
    """The scores the browser starts from: the logits it was sent, with the repetition penalty's moves."""
    return _scores(_live(page).evaluate(_SENT))


def _scores(data: dict) -> np.ndarray:
    dtype = "<f4" if data["dtype"] == "float32" else "<f8"
    scores = np.frombuffer(base64.b64decode(data["logits"]), dtype=dtype).astype(np.float64)
    for token_id, value in data["moved"]:
        scores[token_id] = value
    return scores


def _problems(page) -> list[str]:
    """Texts of the live chart that overlap each other or leave the chart (or the page), and slider labels cut."""
    seen = _live(page).evaluate(_LIVE_TEXTS)
    area, texts = seen["area"], seen["texts"]
    problems = [f"the chart is {seen['width']:.0f} px wide on a {seen['page']} px page"] if (
        area["right"] > seen["page"] + 1) else []
    problems += [f"{t['text']!r} leaves the chart" for t in texts if _outside(t["corners"], area)]
    problems += [f"the slider label {label!r} is cut" for label in seen["cut"]]
    for i, first in enumerate(texts):
        for second in texts[i + 1:]:
            if _overlap(first["corners"], second["corners"]):
                problems.append(f"{first['text']!r} overlaps {second['text']!r}")
    return problems


def test_moving_the_temperature_slider_reshapes_the_distribution(app_url, page, screenshots):
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, top_k=40, max_tokens=4)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    before = metric(page, "Entropy after")
    readout = _live(page).locator(".ls-readout")
    shown_before = readout.inner_text()
    thumb = _thumb(page)
    expect(thumb).to_have_value("0.7")
    thumb.focus()
    for step in range(10):  # 10 steps of 0.05: 0.7 -> 0.2
        thumb.press("ArrowLeft")
        if step == 4:  # a pause midway, as under load: the slider rests at 0.45 and that step is sent too
            page.wait_for_timeout(600)
    expect(thumb).to_have_value("0.2")
    # The chart and its readout follow at once, in the browser ...
    assert readout.inner_text() != shown_before
    # ... and the page's numbers once the slider rests (the what-if part reruns on the server).
    _wait_python_has(page, "temperature", "0.2")
    expect(page.get_by_test_id("stMetric").filter(has_text="Entropy after")).not_to_contain_text(before)
    expect(page.locator(EXCEPTION)).to_have_count(0)
    # A lower temperature sharpens the distribution: less uncertainty left.
    after = float(metric(page, "Entropy after").split()[0])
    assert after < float(before.split()[0])
    assert f"entropy after: {after:.2f} bits" in readout.inner_text()  # the browser and Python agree
    expect(thumb).to_have_value("0.2")  # the rerun did not move the slider back
    # It was a what-if: the sidebar (the journey's settings) still says 0.7.
    sidebar_thumb = page.get_by_test_id("stSidebar").get_by_test_id("stSlider").filter(
        has_text="Temperature").get_by_role("slider")
    expect(sidebar_thumb).to_have_value("0.7")
    # A preset is a change from the server: the live slider takes it.
    page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Creative writing: 0.9").click()
    expect(thumb).to_have_value("0.9")
    wait_idle(page)
    expect(page.get_by_test_id("stMetric").filter(has_text="Entropy after")).not_to_contain_text(f"{after:.2f} bits")
    # Back to the value the chart sent before the preset: the page follows again, and the slider stays.
    thumb.focus()
    for _ in range(14):  # 0.9 -> 0.2
        thumb.press("ArrowLeft")
    expect(page.get_by_test_id("stMetric").filter(has_text="Entropy after")).to_contain_text(f"{after:.2f} bits")
    wait_idle(page)
    expect(thumb).to_have_value("0.2")
    full_screenshot(page, screenshots / "sampling-what-if.png")


def test_the_browser_resamples_exactly_as_python_does(app_url, page):
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, max_tokens=4)
    live = _live(page)
    vocabulary = live.evaluate("root => root.liveData.vocabulary")
    scores = _logits(page)
    assert scores.size == vocabulary == 49152, "the browser must have every token's logit"
    # The first chart is drawn from Python's transform (the opening), before the browser decodes the logits; the
    # browser's own transform at the same settings, after the combinations below, must draw the same chart.
    opening = json.loads(live.get_attribute("data-probabilities"))
    assert opening.pop("by") == "python"
    for settings, stage in COMBINATIONS:
        computed = live.evaluate(_SET, settings)
        assert computed["settings"] == settings
        expected = apply_sampling(scores, SamplingSettings(**settings))
        if stage is not None:
            assert expected.removed_count(stage) > 0, f"{settings} does not exercise {stage}"
        ids = np.array([token["id"] for token in computed["shown"]])
        finals = np.array([token["final"] for token in computed["shown"]])
        stages = [token["removed"] for token in computed["shown"]]
        assert computed["kept"] == expected.kept, settings
        np.testing.assert_allclose(finals, expected.final_probs[ids], rtol=1e-9, atol=1e-12, err_msg=str(settings))
        assert stages == [int(s) for s in expected.removed_by[ids]], settings
        assert computed["entropy"] == pytest.approx(expected.entropy_bits, rel=1e-9, abs=1e-12)
    assert any(token["removed"] != KEPT for token in computed["shown"]), "some shown token must be removed"
    again = live.evaluate(_SET, opening["settings"])
    assert again.pop("by") == "browser"
    assert again["kept"] == opening["kept"] and again["entropy"] == pytest.approx(opening["entropy"], rel=1e-9)
    assert [t["removed"] for t in again["shown"]] == [t["removed"] for t in opening["shown"]]
    np.testing.assert_allclose([t["final"] for t in again["shown"]], [t["final"] for t in opening["shown"]],
                               rtol=1e-9, atol=1e-12)
    # The repetition penalty runs on the server: moving it sends the moved logits, and the browser uses them.
    penalty = page.get_by_test_id("stMainBlockContainer").get_by_test_id("stSlider").filter(
        has_text="Repetition penalty").get_by_role("slider")
    fingerprint = live.evaluate("root => root.liveData.fingerprint")
    penalty.focus()
    for _ in range(6):  # 1.0 -> 1.3
        penalty.press("ArrowRight")
    page.wait_for_function(f"() => document.querySelector('{LIVE}').liveData.fingerprint !== '{fingerprint}'",
                           polling=POLL_MS)
    wait_idle(page)
    # Each key press may rerun the page: a later run can still bring the logits of a later step, so the logits
    # and the transform compared are read together.
    settings = {"temperature": 1.0, "top_k": 0, "top_p": 0.8, "min_p": 0.0}
    read = live.evaluate(_SENT_AND_SET, settings)
    penalized, computed = _scores(read["sent"]), read["computed"]
    assert read["sent"]["moved"] and not np.array_equal(penalized, scores)
    expected = apply_sampling(penalized, SamplingSettings(**settings))
    ids = np.array([token["id"] for token in computed["shown"]])
    np.testing.assert_allclose([t["final"] for t in computed["shown"]], expected.final_probs[ids], rtol=1e-9,
                               atol=1e-12)
    assert computed["kept"] == expected.kept


def test_slider_step_redraw_time_is_measured(app_url, page, screenshots):
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, max_tokens=4)
    page.evaluate("""() => {
      window.redraw = {pressed: null};
      document.addEventListener('keydown', () => { window.redraw = {pressed: performance.now()}; }, {capture: true});
    }""")
    live = _live(page)
    thumb = _thumb(page)
    thumb.focus()
    times, computes = [], []
    for step in range(STEPS):
        draws = int(live.get_attribute("data-draws") or 0)
        thumb.press("ArrowRight")
        page.wait_for_function(f"() => Number(document.querySelector('{LIVE}').dataset.draws) > {draws}",
                               polling=POLL_MS)
        times.append(live.evaluate("root => Number(root.dataset.drawnAt) - window.redraw.pressed"))
        computes.append(float(live.get_attribute("data-compute-ms")))
        page.wait_for_timeout(500)  # the slider rests: the page's what-if part reruns on the server
        wait_idle(page)
    expect(thumb).to_have_value(f"{0.7 + 0.05 * STEPS:.1f}")
    median = statistics.median(times)
    (screenshots / SLIDER_LATENCY_FILE).write_text(json.dumps(
        {"median_ms": round(median, 1), "min_ms": round(min(times), 1), "max_ms": round(max(times), 1),
         "steps": STEPS, "transform_median_ms": round(statistics.median(computes), 2),
         "measures": "key press on the live temperature slider to the next animation frame after the "
                     "chart's SVG was updated (performance.now() in the page)"}) + "\n")
    print(f"\nslider redraw median {median:.1f} ms: {[round(t, 1) for t in times]}; "
          f"transform + SVG update {computes}")
    assert all(t > 0 for t in times)


def test_the_live_chart_is_legible_at_every_size(app_url, page, screenshots):
    """One page opened at the widest size, then resized to each of the others, the checks at each."""
    width, height = SIZES["laptop"]
    page.set_viewport_size({"width": width, "height": height})
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, max_tokens=4)
    for size, (width, height) in SIZES.items():
        page.set_viewport_size({"width": width, "height": height})
        wait_idle(page)
        expect(page.locator(EXCEPTION)).to_have_count(0)
        for settings, _ in COMBINATIONS[:3]:
            _live(page).evaluate(_SET, settings)
            assert _problems(page) == [], (size, settings)
        _live(page).evaluate(_SET, COMBINATIONS[2][0])
        folder = screenshots / size
        folder.mkdir(exist_ok=True)
        _live(page).scroll_into_view_if_needed()
        page.screenshot(path=folder / "sampling-live.png")



# On the live chart's first drawing, made without the logits (a new tab's first run does not send them): move the
# temperature slider at once, before the run that brings them, and keep what the chart said then. The slider is
# held, not let go: let go, its settings go to Python, and a rerun at them that came before the logits would draw
# Python's own numbers at 0.5 (right too, but not what this test is about: the order would decide who drew them).
_MOVE_BEFORE_THE_LOGITS = """() => document.addEventListener('DOMContentLoaded', () => new MutationObserver((_, observer) => {
  const root = document.querySelector('.live-sampling');
  if (!root || !root.dataset.probabilities) return;
  observer.disconnect();
  const input = root.querySelector('input[data-knob="temperature"]');
  const logits = root.liveData.logits;
  input.value = '0.5';
  input.dispatchEvent(new Event('input', {bubbles: true}));
  window.moved = {logits, drawn: JSON.parse(root.dataset.probabilities)};
}).observe(document.body, {childList: true, subtree: true, attributes: true}))"""


def test_a_slider_moved_before_the_logits_arrive_is_drawn_when_they_do(app_url, page):
    page.add_init_script(f"({_MOVE_BEFORE_THE_LOGITS})()")
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, max_tokens=4)
    moved = page.evaluate("window.moved")
    # Moved with no logits yet: the chart stayed as Python drew it, at the link's settings.
    assert moved["logits"] is None
    assert moved["drawn"]["by"] == "python" and moved["drawn"]["settings"]["temperature"] == 0.7
    # open_page waited for the details run: the logits came, at the link's settings, with the slider still held.
    assert _live(page).evaluate("root => root.liveData.logits !== null && root.liveData.settings.temperature") == 0.7
    drawn = json.loads(_live(page).get_attribute("data-probabilities"))
    assert drawn["by"] == "browser" and drawn["settings"]["temperature"] == 0.5
    expected = apply_sampling(_logits(page), SamplingSettings(temperature=0.5))
    ids = np.array([token["id"] for token in drawn["shown"]])
    np.testing.assert_allclose([t["final"] for t in drawn["shown"]], expected.final_probs[ids], rtol=1e-9, atol=1e-12)
    _live(page).locator('input[data-knob="temperature"]').dispatch_event("change")  # let go
    _wait_python_has(page, "temperature", "0.5")
    assert metric(page, "Entropy after") == f"{expected.entropy_bits:.2f} bits"  # and the page below followed


def test_a_run_begun_before_the_last_send_does_not_move_the_slider_back(app_url, page):
    """Under load a rerun can end after the visitor's next step was sent: its settings are older. The server's
    replies are held while the slider takes a second step, then let through in order: the slider never shows the
    older value again, and it ends where the visitor left it."""
    relay = {"held": None, "browser": None}

    def connect(browser_side):
        server = browser_side.connect_to_server()
        relay["browser"] = browser_side
        browser_side.on_message(server.send)

        def from_server(message):
            if relay["held"] is None:
                browser_side.send(message)
            else:
                relay["held"].append(message)
        server.on_message(from_server)

    page.route_web_socket("**/_stcore/stream", connect)
    open_page(page, app_url, "sampling", prompt=PROMPT, temperature=0.7, max_tokens=4)
    live, thumb = _live(page), _thumb(page)
    live.evaluate("""root => {
      const input = root.querySelector('input[data-knob="temperature"]');
      root.seenValues = [];
      new MutationObserver(() => root.seenValues.push(input.value))
        .observe(root, {attributes: true, attributeFilter: ['data-draws']});
    }""")
    thumb.focus()
    thumb.press("ArrowRight")  # 0.75: sent once the slider rests (350 ms), and its rerun begins
    page.wait_for_timeout(400)
    relay["held"] = []
    thumb.press("ArrowRight")  # 0.8: sent while the replies of the 0.75 run are held
    page.wait_for_timeout(1500)
    held, relay["held"] = relay["held"], None
    assert held, "the 0.75 run's replies should have been held"
    for message in held:
        relay["browser"].send(message)
    wait_idle(page)
    expect(thumb).to_have_value("0.8")
    seen = live.evaluate("root => root.seenValues")
    assert "0.8" in seen and "0.75" not in seen[seen.index("0.8"):], seen
