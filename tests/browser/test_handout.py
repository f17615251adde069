"""The handout opens in Debian's chromium with the network off and shows every stage and chart."""

from pathlib import Path

import pytest

from charts.handout import handout_document
from lifecycle.forward import token_text
from lifecycle.journey import JourneyInput, run_journey
from lifecycle.kv_cache import KVCacheShape
from ui.stages import PHASES

PROMPT = 'Say hi. <script>window.injected = 1</script> & "quotes"'
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
    page.wait_for_function(f"document.querySelectorAll('.chart .main-svg').length >= {charts}", timeout=30_000)
    headings = page.locator("h2").all_inner_texts()
    stages = [p.title for phase in JOURNEY_PHASES for p in PHASES[phase] if p.url_path not in ("",)]
    for title in stages:
        assert any(h.endswith(f". {title}") for h in headings), f"no section for stage {title!r}"
    assert page.locator(".chart").count() == charts >= 8
    assert page.evaluate("window.injected") is None  # the prompt's <script> is text, not code
    assert PROMPT in page.locator("pre").first.inner_text()
    assert not errors and all(url.startswith("file://") for url in requests)
    page.screenshot(path=screenshots / "handout-1024.png")
    context.close()
