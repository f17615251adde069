"""The Sampling page under AppTest: this run's numbers, the live chart's data and what-if settings, presets, real draws."""

import base64
import json

import numpy as np
import pytest

from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.forward_pass import run_forward
from lifecycle.stages.sampling import SamplingSettings, apply_sampling, choose_token
from tests.pages.harness import component_sends, details_drawn, markdowns, plotly_figure

PROMPT = "The capital of France is"
SETTINGS = dict(prompt=PROMPT, temperature=0.7, top_p=0.9, max_tokens=2, seed=3)


@pytest.fixture(scope="module")
def prompt_ids():
    return render_prompt(Conversation(new_message=PROMPT)).ids


@pytest.fixture(scope="module")
def logits(loaded, prompt_ids):
    return run_forward(loaded, prompt_ids).last_logits


def metric(app, label):
    return next(m.value for m in app.metric if m.label == label)


def trace(figure, name):
    return next(t for t in figure.data if t.name == name)


def live_data(app) -> dict:
    """What the page sent the live chart (ui/live_sampling.js) this run."""
    return json.loads(app.get("bidi_component")[0].proto.json)


LIVE = "what_if_live"  # views/sampling.py's key for its live chart


def browser_sends(app, settings: dict):
    """Run the app as if the live chart's sliders had come to rest on ``settings`` in the browser."""
    return component_sends(app, LIVE, {"settings": settings})


def test_page_shows_the_resampled_distribution_of_this_prompt(run_page, logits, prompt_ids):
    app = run_page("sampling", **SETTINGS)
    assert not app.exception and not app.error
    expected = apply_sampling(logits, SamplingSettings(temperature=0.7, top_p=0.9), prompt_ids)
    assert metric(app, "Tokens that survive") == f"{expected.kept:,}"
    assert metric(app, "Entropy after") == f"{expected.entropy_bits:.2f} bits"
    # The live chart gets this prompt's logits, every one (the engine's batched prefill rounds a little
    # differently from run_forward), and the model's top tokens as text.
    data = live_data(app)
    assert np.allclose(np.frombuffer(base64.b64decode(data["logits"]), "<f4"), logits, atol=1e-3)
    top = np.argsort(-expected.base_probs, kind="stable")[:25]
    assert [token["id"] for token in data["shown"]] == [int(i) for i in top]
    # The what-if sliders start from the sidebar's settings.
    assert data["settings"] == {"temperature": 0.7, "top_p": 0.9, "top_k": 0, "min_p": 0.0}
    assert app.slider(key="what_if_repetition_penalty").value == 1.0


def test_a_new_tab_gets_the_chart_first_and_the_logits_in_the_run_after(run_page, logits, prompt_ids):
    first = run_page("sampling", drawn=False, **SETTINGS)
    data = live_data(first)
    expected = apply_sampling(logits, SamplingSettings(temperature=0.7, top_p=0.9), prompt_ids)
    ids = [token["id"] for token in data["shown"]]
    assert data["logits"] is None  # the first run is the picture alone
    assert data["opening"]["kept"] == expected.kept
    assert np.allclose(data["opening"]["finals"], expected.final_probs[ids], atol=1e-6)
    after = live_data(details_drawn(first))
    assert np.allclose(np.frombuffer(base64.b64decode(after["logits"]), "<f4"), logits, atol=1e-3)
    assert after["fingerprint"] == data["fingerprint"] and after["opening"] == data["opening"]


def test_moving_a_slider_recomputes_but_leaves_the_journey_settings(run_page, logits, prompt_ids):
    app = run_page("sampling", **SETTINGS)
    before = metric(app, "Tokens that survive")
    browser_sends(app, {"temperature": 1.2, "top_p": 0.5, "top_k": 10, "min_p": 0.0})
    assert not app.exception
    expected = apply_sampling(logits, SamplingSettings(temperature=1.2, top_p=0.5, top_k=10), prompt_ids)
    assert metric(app, "Tokens that survive") == f"{expected.kept:,}" != before
    assert metric(app, "Entropy after") == f"{expected.entropy_bits:.2f} bits"
    assert app.session_state["temperature"] == 0.7  # a what-if: the sidebar still says 0.7
    next(b for b in app.button if b.label == "Use these settings for the journey").click().run()
    assert not app.exception
    assert (app.session_state["temperature"], app.session_state["top_p"], app.session_state["top_k"]) == (1.2, 0.5, 10)
    assert live_data(app)["settings"] == {"temperature": 1.2, "top_p": 0.5, "top_k": 10, "min_p": 0.0}


@pytest.mark.parametrize("sent", [
    {"temperature": 99, "top_p": 0.5, "top_k": 10, "min_p": 0.0},
    {"temperature": "hot", "top_p": 0.5, "top_k": 10, "min_p": 0.0},
    {"temperature": 1.0, "top_p": 0.0, "top_k": -3, "min_p": 0.0},
    {"temperature": 1.0},
])
def test_settings_a_browser_sends_out_of_range_are_ignored(run_page, sent):
    app = run_page("sampling", **SETTINGS)
    before = metric(app, "Entropy after")
    browser_sends(app, sent)
    assert not app.exception and not app.error
    assert metric(app, "Entropy after") == before
    assert live_data(app)["settings"] == {"temperature": 0.7, "top_p": 0.9, "top_k": 0, "min_p": 0.0}


def test_the_repetition_penalty_is_applied_on_the_server(run_page, logits, prompt_ids):
    app = run_page("sampling", **SETTINGS)
    assert live_data(app)["moved"] == []
    app.slider(key="what_if_repetition_penalty").set_value(1.5).run()
    assert not app.exception
    data = live_data(app)
    sent = np.frombuffer(base64.b64decode(data["logits"]), "<f4")
    shift = apply_sampling(sent, SamplingSettings(repetition_penalty=1.5), prompt_ids).shift("repetition_penalty")
    assert [i for i, _ in data["moved"]] == [int(i) for i in shift.ids] and len(shift.ids) > 3
    assert [v for _, v in data["moved"]] == [float(v) for v in shift.after]


def test_presets_set_the_what_if_temperature(run_page):
    app = run_page("sampling", **SETTINGS)
    next(b for b in app.button if b.label.startswith("Creative writing")).click().run()
    assert live_data(app)["settings"]["temperature"] == 0.9
    next(b for b in app.button if b.label.startswith("Extraction, tools")).click().run()
    assert live_data(app)["settings"]["temperature"] == 0.0
    assert metric(app, "Tokens that survive") == "1"


def test_draws_are_real_seeded_choices(run_page, logits, prompt_ids):
    app = run_page("sampling", **SETTINGS)
    sampled = apply_sampling(logits, SamplingSettings(temperature=0.7, top_p=0.9), prompt_ids)
    rng = np.random.default_rng(3)
    counts = np.bincount([choose_token(sampled, rng) for _ in range(1000)], minlength=sampled.final_probs.size)
    figure = plotly_figure(app, "draws")
    expected, observed = figure.data[0].y, figure.data[1].y
    assert sum(observed) == pytest.approx(1.0)
    assert sum(expected) == pytest.approx(1.0)
    top = np.argsort(-sampled.final_probs, kind="stable")[: len(observed)]
    assert list(observed[:5]) == pytest.approx(list(counts[top[:5]] / 1000))  # the page's draws, one by one
    assert expected[0] == pytest.approx(sampled.final_probs[top[0]], abs=1e-4)


def test_api_stages_report_what_the_grammar_mask_and_logit_bias_did(run_page, loaded, logits, prompt_ids):
    from lifecycle.features.tools import output_rules

    app = run_page("sampling", **SETTINGS)
    rows = app.dataframe[0].value
    assert list(rows["Stage"])[:2] == ["grammar mask (response_format)", "logit bias"]
    assert set(rows.loc[rows["Stage"].isin(["grammar mask (response_format)", "logit bias"]), "What it did"]) == {"nothing"}
    app.toggle(key="api_grammar").set_value(True).run()
    top = int(app.selectbox(key="api_bias_token").value)
    app.slider(key="api_bias").set_value(-100.0).run()
    assert not app.exception
    mask = output_rules({"type": "json_object"}).constraint(loaded).allowed()
    expected = apply_sampling(logits, SamplingSettings(temperature=0.7, top_p=0.9, logit_bias=((top, -100.0),)),
                              prompt_ids, prompt_ids, mask)
    rows = app.dataframe[0].value.set_index("Stage")
    removed = loaded.vocab_size - int(mask.sum())
    assert rows.loc["grammar mask (response_format)", "What it did"] == f"removed {removed:,} tokens"
    assert rows.loc["grammar mask (response_format)", "Tokens in play"] == int(mask.sum())
    assert rows.loc["logit bias", "What it did"] == "moved 1 logit (by up to 100.00)"
    assert rows["Tokens in play"].iloc[-1] == expected.kept
    assert f"only **{int(mask.sum()):,}** can start a JSON object" in " ".join(m for m in markdowns(app))


def test_lesson_states_this_prompts_distribution_before_and_after(run_page, logits, prompt_ids):
    app = run_page("sampling", **SETTINGS)
    lesson = next(m for m in markdowns(app) if "most likely next token" in m)
    shifted = logits.astype(np.float64) - logits.max()
    model = np.exp(shifted) / np.exp(shifted).sum()  # softmax at temperature 1, computed here
    entropy = -(model[model > 0] * np.log2(model[model > 0])).sum()
    top = int(np.argmax(model))
    sampled = apply_sampling(logits, SamplingSettings(temperature=0.7, top_p=0.9), prompt_ids)
    assert f"has a **{model[top]:.1%}** chance" in lesson and f"entropy is **{entropy:.2f} bits**" in lesson
    assert f"**{sampled.kept:,} of {logits.size:,}** tokens stay in play" in lesson
    assert f"the top token's chance becomes **{sampled.final_probs[top]:.1%}**" in lesson
    assert f"the entropy **{sampled.entropy_bits:.2f} bits**" in lesson


def test_bytes_of_split_characters_read_in_hex_and_are_explained(run_page, loaded):
    """Chinese starts with a token holding one byte of a character: written <0xE6>, never U+FFFD."""
    from lifecycle.stages.forward_pass import token_text
    from lifecycle.stages.vocabulary import show_token

    prompt = "Translate to Chinese: cat"
    app = run_page("sampling", prompt=prompt, temperature=0.7, max_tokens=2)
    assert not app.exception and not app.error
    ids = render_prompt(Conversation(new_message=prompt)).ids
    favourite = int(np.argmax(run_forward(loaded, ids, layers=[]).last_logits))
    assert not token_bytes_are_text(loaded, favourite)  # the premise: the top token is a partial character
    picker = app.selectbox(key="api_bias_token")
    assert picker.options[0] == f"{show_token(token_text(loaded, favourite))} (id {favourite})"
    assert picker.options[0].startswith("<0x")
    labels = [str(label) for label in plotly_figure(app, "draws").data[0].x]
    assert any("0xE" in label for label in labels) and not any("\ufffd" in label for label in labels)
    assert any("`<0xF0>` is one byte of a character" in c.value for c in app.caption)


def token_bytes_are_text(loaded, token_id: int) -> bool:
    from lifecycle.stages.vocabulary import token_bytes

    try:
        token_bytes(loaded).of(token_id).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_after_greedy_decoding_the_what_if_opens_at_the_models_own_distribution(run_page, logits, prompt_ids):
    app = run_page("sampling", prompt=PROMPT, temperature=0.0, max_tokens=2)
    assert live_data(app)["settings"]["temperature"] == 1.0
    assert app.session_state["temperature"] == 0.0  # the journey stays greedy
    expected = apply_sampling(logits, SamplingSettings(temperature=1.0), prompt_ids)
    assert metric(app, "Tokens that survive") == f"{expected.kept:,}"
    captions = [c.value for c in app.caption]
    assert "Not the journey's settings: temperature 1 here, 0 in the journey (greedy: it always takes the top token)." \
        in captions


def test_a_what_if_at_the_journeys_settings_says_so(run_page):
    app = run_page("sampling", **SETTINGS)
    assert "The sliders start at the journey's settings." in [c.value for c in app.caption]
    app.slider(key="what_if_repetition_penalty").set_value(1.5).run()
    assert "Not the journey's settings: repetition penalty 1.5 here, 1 in the journey." in [c.value for c in app.caption]
