"""The pages led by one of the app's own SVG components (the step replays, the live sampling chart) hold no Plotly
chart in their first run, so a new tab draws the picture without waiting for plotly.js: the details under it come
in the run the browser starts once it has drawn the picture (ui.when_idle.details_ready). The browser's side of it
(the picture drawn before any Plotly chart, the details arriving by themselves) is
tests/browser/test_instant_generation.py's."""

from __future__ import annotations

import pytest

from tests.pages.harness import components, details_drawn, run_page
from ui.when_idle import DETAILS_PENDING

PROMPT = "What's the capital of India?"
PICTURES = {"generation": "generation_replay", "kv-cache": "kv_growth_replay", "streaming": "stream_replay",
            "sampling": "what_if_live"}  # each page's live component, by its key


def _captions(app) -> list[str]:
    return [caption.value for caption in app.caption]


@pytest.mark.parametrize("url_path", list(PICTURES))
def test_the_first_run_draws_the_picture_and_the_next_its_details(url_path):
    first = run_page(url_path, drawn=False, prompt=PROMPT, temperature=0)
    assert not first.exception
    assert components(first, PICTURES[url_path])
    assert not first.get("plotly_chart"), "a Plotly chart in the first run makes the picture wait for plotly.js"
    assert DETAILS_PENDING in _captions(first)

    drawn = details_drawn(first)
    assert not drawn.exception
    assert components(drawn, PICTURES[url_path])
    assert drawn.get("plotly_chart"), "the details never came"
    assert DETAILS_PENDING not in _captions(drawn)
