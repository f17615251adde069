"""The pages that lead with a picture hold back, in their first run, every element whose code the browser must fetch
and run before it draws anything of that run (a Plotly chart: plotly.js; a code block: its syntax highlighter; a
data grid; a JSON viewer; a table, a metric or a widget, unless the picture is read by it): the details under the picture come in the run the browser starts once it has drawn the picture
(ui.when_idle.details_ready). The browser's side of it (the picture drawn before any Plotly chart, the details
arriving by themselves) is tests/browser/test_legibility.py's; the open times are the bench's."""

from __future__ import annotations

import importlib

import pytest

from tests.pages.harness import EVERY_PAGE_PROMPT, details_drawn, run_page
from ui.stages import HOME, STAGES
from ui.when_idle import DETAILS_PENDING

# test_frame.py's question and default settings: in its worker, these runs find its results (the Agents page's
# ~13 s of CPU among them).
PROMPT = EVERY_PAGE_PROMPT
# The pages with details held back: every view with a DETAILS key.
PAGES = [page.url_path for page in (HOME, *STAGES) if hasattr(importlib.import_module(page.view), "DETAILS")]
# Elements whose code Streamlit loads lazily, and large: a picture in the same run waits for it.
HEAVY = ("plotly_chart", "code", "dataframe", "json")
# Smaller ones, each with code of its own the browser also loads before it draws the run (widgets ~0.03-0.05 s each
# kind, measured in new tabs): they come with the details too, unless the picture is read by them.
WIDGETS = ("table", "metric", "slider", "radio", "text_area", "text_input", "number_input", "selectbox", "checkbox",
           "toggle", "button", "segmented_control", "button_group")
PART_OF_THE_PICTURE = {
    "tokenization": {"metric"},  # each tokenizer's token count, over its chips
    "gateway": {"radio", "text_input", "button"},  # the picture is the request's form: the key, the model, send
    "live-calls": {"text_input", "metric"},  # the live panel is the picture, read for the key presented above it
}


def _captions(app) -> list[str]:
    return [caption.value for caption in app.caption]


def _heavy(app, kinds=HEAVY) -> dict[str, int]:
    return {kind: len(app.get(kind)) for kind in kinds if app.get(kind)}


@pytest.mark.parametrize("url_path", PAGES, ids=[p or "home" for p in PAGES])
def test_the_first_run_draws_the_picture_and_the_next_its_details(url_path):
    first = run_page(url_path, drawn=False, prompt=PROMPT)
    assert not first.exception
    assert not _heavy(first), f"the first run holds elements the picture would wait for: {_heavy(first)}"
    widgets = _heavy(first, tuple(set(WIDGETS) - PART_OF_THE_PICTURE.get(url_path, set())))
    assert not widgets, f"the first run holds widgets the picture would wait for: {widgets}"
    assert DETAILS_PENDING in _captions(first)

    drawn = details_drawn(first)
    assert not drawn.exception
    assert _heavy(drawn), "the details never came"
    assert DETAILS_PENDING not in _captions(drawn)
