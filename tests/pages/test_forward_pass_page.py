"""Forward pass page: the block and the stack drawn are the real hooked forward pass of this prompt."""

import re

import numpy as np
import pytest

from lifecycle.block import block_flow, open_block
from lifecycle.context import Conversation, render_prompt
from lifecycle.forward import run_forward, token_text
from lifecycle.vocabulary import show_token
from tests.pages.harness import plotly_figure, run_page

PROMPT = "Why is the sea salty?"
SETTINGS = dict(prompt=PROMPT, temperature=0, max_tokens=2)


@pytest.fixture(scope="module")
def ids(loaded) -> list[int]:
    return render_prompt(Conversation(new_message=PROMPT)).ids


@pytest.fixture(scope="module")
def app():
    return run_page("forward-pass", **SETTINGS)


def test_default_view_is_the_middle_block_at_the_last_token(app, loaded, ids):
    assert not app.exception and not app.error
    trace = open_block(loaded, ids, loaded.num_layers // 2, len(ids) - 1)
    flow = block_flow(trace.block)
    shapes = app.dataframe[0].value["output shape"].tolist()
    assert shapes[0] == f"({len(ids)} x {loaded.model.config.hidden_size})"
    assert f"({loaded.model.config.num_attention_heads} x {len(ids)} x {len(ids)})" in shapes
    figure = plotly_figure(app, "forward_flow")
    labels = [a.text for a in figure.layout.annotations]
    assert any(label.endswith(f"‖·‖ {flow[-1].norm:,.1f}") for label in labels)
    stack = plotly_figure(app, "forward_stack")
    line = next(t for t in stack.data if t.name == "residual stream")
    np.testing.assert_allclose(line.y, trace.stack.residual_norms, rtol=1e-6)
    weights = plotly_figure(app, "forward_scores").data[-1].y
    np.testing.assert_allclose(weights, trace.block.weights[0][-len(weights):], rtol=1e-5)


def test_sentences_state_the_numbers_of_this_forward_pass(app, loaded, ids):
    """Every fact the default view writes (middle block, last token, head 0), against lifecycle's own run."""
    text = [m.value.replace("\\", "") for m in app.markdown]
    lesson, softmax, stack = (next(t for t in text if marker in t)
                              for marker in ("enter the first block", "Softmax turns", "The logit lens reads"))
    last, middle = len(ids) - 1, loaded.num_layers // 2
    last_token = show_token(token_text(loaded, ids[last]))
    assert f"The prompt's **{len(ids)} tokens**" in lesson and f"**{loaded.num_layers} blocks**" in lesson
    assert f"block **{middle}** is opened up at token '{last_token}' (position {last})" in lesson
    trace = open_block(loaded, ids, middle, last)
    norms = [step.norm for step in block_flow(trace.block)]
    assert f"from length {norms[0]:,.1f} to {norms[-1]:,.1f}" in lesson

    weights = trace.block.weights[0]  # query head 0, the default
    top_key = int(np.argmax(weights))
    assert (f"the largest, {weights[top_key]:.1%}, goes to '{show_token(token_text(loaded, ids[top_key]))}' "
            f"(position {top_key})") in softmax

    forward = run_forward(loaded, ids, layers=[])  # the plain forward pass, not the hooked block trace
    answer = int(np.argmax(forward.last_logits))
    assert f"the model's answer after this token is '{show_token(token_text(loaded, answer))}'" in stack
    lens = [guess.candidates[0].id for guess in forward.logit_lens]
    settles = next(layer for layer in range(len(lens) + 1) if all(i == answer for i in lens[layer:]))
    found = re.search(r"top guess from layer (\d+) on|top guess only at the very last layer", stack)
    assert found and (int(found.group(1)) if found.group(1) else loaded.num_layers - 1) == settles


def test_choosing_a_layer_and_token_redraws_that_block(app, loaded, ids):
    app.slider(key="forward_layer").set_value(3)
    app.selectbox(key="forward_token").set_value(5).run()
    assert not app.exception and not app.error
    trace = open_block(loaded, ids, 3, 5)
    assert "position 5" in app.markdown[1].value and "block **3**" in app.markdown[1].value
    rope = plotly_figure(app, "forward_rope")
    before = next(t for t in rope.data if t.name == "before RoPE")
    assert before.x[1] == pytest.approx(trace.block.query[0, 0], rel=1e-5)
    scores = plotly_figure(app, "forward_scores").data
    masked = next(t for t in scores if t.name == "masked (-inf)")
    assert len(masked.x) == min(4, len(ids) - 6)  # later keys shown as masked
