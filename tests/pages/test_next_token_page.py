"""Next-token page: the numbers shown are the real model's distribution for the prompt."""


import numpy as np
import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.forward_pass import run_forward, token_text
from lifecycle.stages.sampling import next_token_distribution
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import component_data, markdowns, plotly_figure

PROMPT = "Why is the sea salty?"


@pytest.fixture(scope="module")
def expected(loaded):
    ids = render_prompt(Conversation(new_message=PROMPT)).ids
    return next_token_distribution(run_forward(loaded, ids, layers=[]).last_logits, lambda i: token_text(loaded, i))


def test_candidates_entropy_and_greedy_match_the_model(run_page, expected):
    app = run_page("next-token", prompt=PROMPT, temperature=0, max_tokens=2)
    assert not app.exception and not app.error
    top = expected.top(15)
    probability, _ = component_data(app, "next_token_bars")["views"]
    rows = probability["rows"]
    np.testing.assert_allclose([r["segments"][0]["value"] for r in rows], [c.probability for c in top], rtol=1e-4)
    assert [r["label"] for r in rows[:3]] == [f"#{c.rank} {show_token(c.text)}" for c in top[:3]]
    assert rows[0]["segments"][0]["text"] == f"{top[0].probability:.1%}"
    metrics = {m.proto.label: m.proto.body for m in app.get("metric")}
    assert metrics["Entropy"] == f"{expected.entropy_bits:.2f} bits"
    entropy_help = next(m.proto.help for m in app.get("metric") if m.proto.label == "Entropy")
    vocab = expected.probs.size
    assert f"log2({vocab:,}) = {np.log2(vocab):.1f} bits" in entropy_help  # the model's vocabulary, not a literal
    assert metrics["Greedy decoding picks"] == show_token(top[0].text)
    assert f"**{top[0].probability:.1%}**" in markdowns(app)[1]


def test_the_page_never_waits_for_the_generation_and_shows_its_first_token_once_it_ran(run_page):
    from lifecycle.model import shared_model
    from lifecycle.results import shared_results
    from ui.settings import JourneySettings

    settings = JourneySettings.from_sidebar(prompt=PROMPT + " Twice?", temperature=0, max_tokens=2)
    results = shared_results(shared_model())
    app = run_page("next-token", prompt=settings.prompt, temperature=0, max_tokens=2)
    assert not app.exception and not app.error
    assert results.peek_answer(settings.journey_input()) is None  # the page started no generation
    assert "First token generated" not in {m.proto.label for m in app.get("metric")}
    assert any("has not run yet" in c.value for c in app.caption)
    results.answer(settings.journey_input()).result(120)  # e.g. another page (or the warm command) ran it
    app.run()
    metrics = {m.proto.label: m.proto.body for m in app.get("metric")}
    greedy = metrics["Greedy decoding picks"]
    assert metrics["First token generated"] == greedy  # temperature 0 -> greedy
    assert any("matches the argmax" in c.value for c in app.caption)


def test_rank_curve_spans_the_vocabulary_and_the_bars_carry_log_probabilities(run_page, expected):
    app = run_page("next-token", prompt=PROMPT, temperature=0, max_tokens=2)
    curve = plotly_figure(app, "next_token_curve").data[0]
    assert curve.x[0] == 1 and curve.x[-1] == expected.probs.size
    assert curve.y[0] == pytest.approx(expected.probs.max(), rel=1e-4)
    caption = next(c.value for c in app.caption if c.value.startswith("Every one of the"))
    assert (f"from {expected.probs.max():.1%} for the top token down to {expected.probs.min():.1e} "
            "for the least likely") in caption
    _, logprob = component_data(app, "next_token_bars")["views"]  # the browser switches to it, with no run
    assert logprob["name"] == "log-probability" and logprob["axis"].startswith("Log-probability")
    np.testing.assert_allclose([r["segments"][0]["value"] for r in logprob["rows"]],
                               [c.logprob for c in expected.top(15)], rtol=1e-4, atol=1e-4)


def test_the_answer_is_highlighted_with_the_first_box_matching_the_distribution(run_page, expected):
    # Next token never starts the generation; it highlights the answer once another page has run it.
    assert not run_page("generation", prompt=PROMPT, temperature=0, max_tokens=4).exception
    app = run_page("next-token", prompt=PROMPT, temperature=0, max_tokens=4)
    assert not app.exception
    bar = plotly_figure(app, "next_token_logprobs").data[0]
    assert len(bar.marker.color) == 4
    # greedy: the first generated token is the argmax, coloured by the probability shown above
    np.testing.assert_allclose(bar.marker.color[0], expected.top(1)[0].probability, rtol=1e-3)


def test_lesson_counts_where_the_probability_mass_sits(run_page, expected):
    app = run_page("next-token", prompt=PROMPT, temperature=0, max_tokens=2)
    lesson = next(m for m in markdowns(app) if "softmax turns them into probabilities" in m)
    ordered = sorted(expected.probs.tolist(), reverse=True)
    half = next(n for n in range(1, len(ordered) + 1) if sum(ordered[:n]) >= 0.5)
    ninety = next(n for n in range(half, len(ordered) + 1) if sum(ordered[:n]) >= 0.9)
    held = sum(ordered[:ninety])
    size = expected.probs.size
    assert f"ends in {size:,} scores (logits)" in lesson
    assert (f"the top {half:,} tokens" if half > 1 else "that one token") in lesson
    assert ninety > 1  # the prompt's top token holds less than 90%
    assert (f"the top {ninety:,} together hold {held:.1%} (the fewest that reach 90%), and the other "
            f"{size - ninety:,} share the remaining {1 - held:.1%}") in lesson
    assert f"about **{2 ** expected.entropy_bits:,.1f}** equally likely tokens" in lesson
    top = expected.top(1)[0]
    assert f"'{show_token(top.text)}' at **{top.probability:.1%}**" in lesson.replace("\\", "")
