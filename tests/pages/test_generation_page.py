"""The Generation page under AppTest: step through the real loop, branch from an alternative, see why it stopped."""

import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.generation import generate
from lifecycle.stages.sampling import SamplingSettings
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import markdowns

PROMPT = "Write a long poem about the sea."
GREEDY = SamplingSettings(temperature=0.0, seed=42)  # the sidebar's other defaults: every filter off
SETTINGS = dict(prompt=PROMPT, temperature=0.0, max_tokens=6)


@pytest.fixture(scope="module")
def prompt_ids():
    return render_prompt(Conversation(new_message=PROMPT)).ids


@pytest.fixture(scope="module")
def original(loaded, prompt_ids):
    return generate(loaded, prompt_ids, GREEDY, 6)


def table(app):
    return app.dataframe[0].value


def click(app, label):
    return next(b for b in app.button if b.label.startswith(label)).click().run()


def _replay(app) -> dict:
    """The data the page sent to the browser's step replay."""
    import json

    (replay,) = [c for c in app.get("bidi_component") if "generation_replay" in c.proto.id]
    return json.loads(replay.proto.json)


def test_the_table_and_the_browser_replay_hold_the_real_generation(run_page, original):
    app = run_page("generation", **SETTINGS)
    assert not app.exception and not app.error
    assert list(table(app)["Id"]) == original.token_ids
    assert list(table(app)["Probability"]) == [f"{s.probability:.1%}" for s in original.steps]
    assert list(table(app)["Token"]) == [show_token(s.text) for s in original.steps]
    first_alternatives = table(app)["Top 5 alternatives"][0].split(" · ")
    assert first_alternatives == [f"{show_token(c.text)} {c.probability:.0%}" for c in original.steps[0].alternatives]
    replay = _replay(app)
    assert replay["tokens"] == [show_token(s.text) for s in original.steps]
    assert replay["p"] == pytest.approx([s.probability for s in original.steps], abs=1e-5)
    assert [row[3] for row in replay["alternatives"][0]] == [int(c.id == original.token_ids[0])
                                                             for c in original.steps[0].alternatives]
    assert original.finish_reason == "length"  # 6 tokens cannot finish a long poem
    assert replay["finish_reason"] == "length"
    assert any("finish_reason: **length**" in w.value for w in app.warning)


def test_picking_an_alternative_continues_from_that_step(run_page, loaded, prompt_ids, original):
    app = run_page("generation", **SETTINGS)
    app.selectbox(key="generation_branch_step").set_value(1).run()  # step 2; the branch must keep step 1
    alternative = app.radio(key="generation_alternative_1").value
    assert alternative.id != original.token_ids[1]
    click(app, "Continue from here")
    assert not app.exception
    expected = generate(loaded, prompt_ids, GREEDY, 6, forced={0: original.token_ids[0], 1: alternative.id})
    rows = table(app)
    assert list(rows["Id"]) == expected.token_ids
    assert list(rows["How chosen"])[:2] == ["replayed", "you picked"]
    assert _replay(app)["how"][:2] == [2, 3]
    click(app, "Back to the original run")
    assert list(table(app)["Id"]) == original.token_ids


def test_try_max_tokens_5_stops_with_length(run_page):
    app = run_page("generation", prompt=PROMPT, temperature=0.0, max_tokens=7)
    click(app, "Try max_tokens = 5")
    assert app.session_state["max_tokens"] == 5
    assert not app.exception
    assert len(table(app)) == 5
    assert any("max_tokens = 5" in w.value and "length" in w.value for w in app.warning)


def test_the_answer_is_highlighted_by_its_logprobs(run_page, loaded):
    import math

    import numpy as np

    from lifecycle.journey import run_journey
    from tests.pages.harness import plotly_figure

    app = run_page("generation", prompt="Name a colour.", temperature=0, max_tokens=6, seed=1)
    assert not app.exception
    bar = plotly_figure(app, "generation_logprobs").data[0]
    from ui.settings import JourneySettings

    settings = JourneySettings.from_sidebar(prompt="Name a colour.", temperature=0, max_tokens=6, seed=1)
    steps = run_journey(settings.journey_input(), loaded).generation.steps
    assert len(bar.marker.color) == len(steps)
    # the same greedy run (batched runs may differ in the last float digits)
    assert np.allclose(bar.marker.color, [math.exp(s.logprob) for s in steps], rtol=1e-3)


def test_lesson_counts_this_runs_steps_and_says_why_it_stopped(run_page, prompt_ids, original):
    import re

    app = run_page("generation", **SETTINGS)
    lesson = next(m for m in markdowns(app) if "one token per step" in m)
    assert f"one token per step: {len(original.steps)} tokens**" in lesson
    assert f"one pass over the **{len(prompt_ids)} prompt tokens**" in lesson
    assert f"It stopped because it reached max_tokens = 6 (finish_reason **{original.finish_reason}**)" in lesson
    per_step = float(re.search(r"each step took \*\*([\d.]+) ms\*\* on average", lesson).group(1))
    assert per_step == pytest.approx(table(app)["Time (ms)"].mean(), abs=0.1)  # both round to 0.1: 0.05 each
    prefill = float(re.search(r"the prefill, ([\d.]+) ms\)", lesson).group(1))
    said = [m for m in (re.search(r"\((\d+) ms for the (\d+) prompt tokens\)", c.value) for c in app.caption) if m]
    assert said and int(said[0].group(2)) == len(prompt_ids)
    assert float(said[0].group(1)) == pytest.approx(prefill, abs=0.55)  # the caption rounds to whole ms, the lesson to 0.1


@pytest.mark.parametrize("page", ["generation", "streaming", "detokenization", ""])
def test_a_generation_that_ended_before_its_first_token_reads_as_such(run_page, loaded, page):
    from lifecycle.journey import answer
    from lifecycle.results import shared_results
    from ui.settings import JourneySettings

    settings = dict(prompt="A generation cancelled before it began.", temperature=0.0, max_tokens=4)
    inp = JourneySettings.from_sidebar(**settings).journey_input()
    results = shared_results(loaded)
    empty = answer(results.prepared(inp), loaded, cancelled=lambda: True)
    assert empty.generation.steps == [] and empty.generation.finish_reason == "cancelled"
    results.cache.get(results.answer_key(inp), lambda _report: empty)  # what the pages will find
    app = run_page(page, **settings)
    assert not app.exception, app.exception
    if page == "generation":
        assert any("before its first token" in info.value and "cancelled" in info.value for info in app.info)
