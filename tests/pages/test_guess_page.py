"""Guess the next token page: guesses are scored against the same cached distribution as the Next token page."""

import numpy as np
import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.forward_pass import run_forward, token_text
from lifecycle.features.guess import points_for
from lifecycle.stages.sampling import next_token_distribution
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import markdowns

PROMPT = "Why is the sea salty?"
SETTINGS = dict(prompt=PROMPT, temperature=0, max_tokens=2)


@pytest.fixture(scope="module")
def expected(loaded):
    ids = render_prompt(Conversation(new_message=PROMPT)).ids
    return next_token_distribution(run_forward(loaded, ids, layers=[]).last_logits, lambda i: token_text(loaded, i))


def metrics(app) -> dict[str, str]:
    return {m.proto.label: m.proto.body for m in app.get("metric")}


def test_nothing_is_revealed_before_the_guess(run_page):
    app = run_page("guess", **SETTINGS)
    assert not app.exception and not app.error
    assert not app.get("plotly_chart")
    assert "Rank" not in metrics(app) and PROMPT in [t.value for t in app.text]


def test_typed_guess_rank_equals_the_rank_in_the_cached_distribution(run_page, expected, loaded):
    app = run_page("guess", **SETTINGS)
    app.text_input(key="guess_text_0").input("sea")
    next(b for b in app.button if b.proto.label == "Lock in and reveal").click().run()
    assert not app.exception and not app.error
    order = np.argsort(-expected.probs, kind="stable")
    readings = [loaded.tokenizer.encode(t, add_special_tokens=False)[0] for t in ("sea", " sea")]
    best = min(int(np.flatnonzero(order == i)[0]) + 1 for i in readings)
    shown = metrics(app)
    assert shown["Rank"] == f"{best:,}"
    token = int(order[best - 1])
    assert shown["Probability"] == f"{expected.probs[token]:.2%}"
    sentence = next(m for m in markdowns(app) if "Your guess" in m).replace("\\", "")
    favourite = expected.top(1)[0]
    verdict = "exactly the model's top choice" if best == 1 else f"rank {best:,} of {expected.probs.size:,}"
    assert (f"was read as the token '{show_token(token_text(loaded, token))}': **{verdict}**, with probability "
            f"**{expected.probs[token]:.2%}**, worth **{points_for(best)} points**") in sentence
    assert f"The model's favourite was '{show_token(favourite.text)}' at {favourite.probability:.1%}." in sentence


def test_picking_the_top_option_scores_full_points_and_rounds_advance(run_page, expected):
    app = run_page("guess", **SETTINGS)
    top = expected.top(1)[0]
    pills = app.get("button_group")[0]
    pills.set_value(top.id)
    next(b for b in app.button if b.proto.label == "Lock in and reveal").click().run()
    assert not app.exception and not app.error
    assert metrics(app)["Rank"] == "1" and metrics(app)["Points"] == "10"
    app.button(key="guess_next_0").click().run()
    assert not app.exception
    assert any("Round 2 of 4" in h.value for h in app.subheader)
    assert metrics(app)["Your score"].startswith("10 / 40")
