"""Attention page: the chosen head's real weights, the pronoun example and the logit lens."""

import json

import numpy as np
import pytest

from charts.live_attention import decoded_triangles
from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.forward_pass import run_forward
from lifecycle.stages.vocabulary import show_token
from tests.pages.harness import markdowns, plotly_figure

PROMPT = "Why is the sea salty?"
PRONOUN = "The programmer fixed the bug because it caused crashes."


@pytest.fixture(scope="module")
def forward(loaded):
    return run_forward(loaded, render_prompt(Conversation(new_message=PROMPT)).ids, layers=[3], max_attention_tokens=128)


def live_data(app) -> dict:
    """What the page sent the live maps (ui/live_attention.js) this run."""
    return json.loads(app.get("bidi_component")[0].proto.json)


def test_the_live_maps_hold_every_layers_and_heads_real_weights(run_page, forward):
    app = run_page("attention", prompt=PROMPT, temperature=0, max_tokens=2)
    assert not app.exception and not app.error
    data = live_data(app)
    assert (data["layers"], data["heads"], data["kv_group"]) == (30, 9, 3)
    n = len(forward.ids)
    assert data["tokens"] == data["total_tokens"] == n and len(data["labels"]) == n
    maps = decoded_triangles(data["weights"], data["layers"], data["heads"], n)
    np.testing.assert_allclose(maps[3], forward.attentions[3], atol=1e-5)  # 16-bit codes: within 7.7e-6
    mosaic = np.array(plotly_figure(app, "attention_mosaic").data[0].z, dtype=float)
    assert mosaic.shape == (9 * 25 - 1, 30 * 25 - 1)  # 36 tokens block-averaged to 24 per tile
    text = " ".join(m for m in markdowns(app))
    assert "9 attention heads" in text and "3 sets of keys and values" in text


def test_pronoun_example_points_at_it_and_the_button_sets_the_prompt(run_page, loaded):
    app = run_page("attention", prompt=PROMPT, temperature=0, max_tokens=2)
    ids = loaded.tokenizer.encode(PRONOUN, add_special_tokens=False)
    example = run_forward(loaded, ids)
    it, bug = 6, 4
    weights = np.array([[a[h, it, bug] for h in range(a.shape[0])] for _, a in sorted(example.attentions.items())])
    layer, head = np.unravel_index(weights.argmax(), weights.shape)
    text = " ".join(m for m in markdowns(app))
    assert f"layer {layer}, head {head}" in text and f"**{weights.max():.0%}**" in text
    bars = plotly_figure(app, "pronoun_bars").data[0]
    np.testing.assert_allclose(bars.x, example.attentions[layer][head, it, : it + 1], atol=1e-5)
    app.button(key="pronoun_button").click().run()
    assert not app.exception and app.session_state["prompt"] == PRONOUN


def test_logit_lens_lists_every_layers_top_guess(run_page, forward):
    app = run_page("attention", prompt=PROMPT, temperature=0, max_tokens=2)
    lens = plotly_figure(app, "logit_lens").data[0]
    assert list(lens.y) == list(range(30)) and lens.orientation == "h"  # one row per layer
    np.testing.assert_allclose(lens.x, [g.candidates[0].probability for g in forward.logit_lens], rtol=1e-3)
    assert list(lens.text) == [show_token(g.candidates[0].text) for g in forward.logit_lens]


def test_long_prompt_shows_what_was_cut(run_page):
    app = run_page("attention", prompt="word " * 150, temperature=0, max_tokens=1)
    assert not app.exception
    assert any("Showing the last 128 of" in i.value for i in app.info)
    data = live_data(app)
    # 30 x 9 maps of 128 tokens would be 4.5 MB: the live maps hold the last tokens that fit 2 MiB, and say so.
    assert data["tokens"] < 128 and 270 * data["tokens"] * (data["tokens"] + 1) <= 2 * 2**20
    assert any(f"The live maps hold the last {data['tokens']} of" in i.value for i in app.info)


def test_lesson_names_the_sink_and_the_strongest_look_back_of_this_prompt(run_page, loaded):
    from lifecycle.stages.forward_pass import token_text

    app = run_page("attention", prompt=PROMPT, temperature=0, max_tokens=2)
    lesson = markdowns(app)[1].replace("\\", "")
    ids = render_prompt(Conversation(new_message=PROMPT)).ids
    every = run_forward(loaded, ids)  # every layer, all 36 tokens
    weights = [every.attentions[layer] for layer in range(loaded.num_layers)]
    on_first = [w[head, query, 0] for w in weights for head in range(w.shape[0]) for query in range(len(ids))]
    assert f"Here {sum(on_first) / len(on_first):.0%} of all attention" in lesson
    look = max(((float(w[head, -1, key]), layer, head, key) for layer, w in enumerate(weights)
                for head in range(w.shape[0]) for key in range(1, len(ids) - 1)))
    weight, layer, head, key = look
    assert f"on the first token '{show_token(token_text(loaded, ids[0]))}'" in lesson
    assert (f"the last token '{show_token(token_text(loaded, ids[-1]))}' attends most to "
            f"'{show_token(token_text(loaded, ids[key]))}' (**{weight:.0%}**, layer {layer}, head {head}") in lesson
    assert f"Each of the **{len(ids):,} tokens**" in lesson
    assert live_data(app)["start"] == {"layer": int(layer), "head": int(head), "query": len(ids) - 1}
