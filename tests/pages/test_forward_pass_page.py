"""Forward pass page: the block and the stack drawn are the real hooked forward pass of this prompt."""

import numpy as np
import pytest

from lifecycle.block import block_flow, open_block
from lifecycle.context import Conversation, render_prompt
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
