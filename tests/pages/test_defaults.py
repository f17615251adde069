"""The defaults teach the truth: the default journey answers New Delhi and stops by itself, and the
home page's wrong-answer lesson (the Kolkata draw) says what the real model does at that seed."""

from __future__ import annotations

import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.generation import generate_steps
from lifecycle.stages.vocabulary import show_token
from ui.frame import EMPTY_PROMPT
from ui.settings import DEFAULT_PROMPT, WRONG_DRAW, JourneySettings


@pytest.fixture(scope="module")
def prompt_ids():
    return render_prompt(Conversation(new_message=DEFAULT_PROMPT)).ids


def test_default_settings_answer_new_delhi_and_stop(loaded, prompt_ids):
    defaults = JourneySettings()
    steps = list(generate_steps(loaded, prompt_ids, defaults.sampling, defaults.max_tokens))
    text = "".join(step.delta for step in steps)
    assert "New Delhi" in text
    assert steps[-1].finished == "stop"


def test_the_wrong_draw_on_the_home_page_is_what_the_model_does(loaded, prompt_ids):
    settings = JourneySettings.from_sidebar(temperature=WRONG_DRAW["temperature"], seed=WRONG_DRAW["seed"])
    steps = list(generate_steps(loaded, prompt_ids, settings.sampling, settings.max_tokens))
    assert "".join(step.delta for step in steps).strip() == WRONG_DRAW["answer"]
    assert steps[-1].finished == "stop"
    drawn = next(step for step in steps if step.text == WRONG_DRAW["odds"][-1][0])
    odds = {candidate.text: candidate.probability for candidate in drawn.alternatives}
    for token, probability in WRONG_DRAW["odds"]:
        assert odds[token] == pytest.approx(probability, abs=0.0005)
    ranked = sorted(odds, key=odds.get, reverse=True)
    assert ranked[: len(WRONG_DRAW["odds"])] == [token for token, _ in WRONG_DRAW["odds"]]


def test_home_says_how_small_the_model_is_and_tells_the_wrong_draw(run_page, loaded):
    home = run_page("")
    note = next(info.value for info in home.info if "very small model" in info.value)
    assert f"{loaded.parameter_count / 1e6:,.0f} million parameters" in note
    assert WRONG_DRAW["answer"] in note and f"seed {WRONG_DRAW['seed']}" in note
    for token, probability in WRONG_DRAW["odds"]:
        assert f"{show_token(token)} {probability:.1%}" in note.replace("\\", "")
    assert sum("very small model" in info.value for info in home.info) == 1


@pytest.mark.parametrize("url_path", ["", "tokenization", "sampling", "generation"])
def test_an_empty_prompt_gets_the_same_message_on_every_page(run_page, url_path):
    app = run_page(url_path, prompt="")
    assert not app.exception and not app.error
    assert [w.value for w in app.warning] == [EMPTY_PROMPT]
