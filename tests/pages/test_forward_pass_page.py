"""Forward pass page: the block and the stack drawn are the real hooked forward pass of this prompt."""

import json
import re

import numpy as np
import pytest

from charts.live_block import LIVE_TOKENS, unpacked
from lifecycle.stages.block import block_flow, open_block
from lifecycle.stages.context_window import Conversation, render_prompt
from lifecycle.stages.forward_pass import run_forward, token_text
from lifecycle.stages.vocabulary import show_token

from tests.pages.harness import browser_idle, component_sends, components, markdowns, plotly_figure, run_page

PROMPT = "Why is the sea salty?"
SETTINGS = dict(prompt=PROMPT, temperature=0, max_tokens=2)


@pytest.fixture(scope="module")
def ids(loaded) -> list[int]:
    return render_prompt(Conversation(new_message=PROMPT)).ids


FILL = "forward_fill"  # the page's ui.when_idle: the browser has drawn the first tab
STEP_CHARTS = ["forward_norm", "forward_rope", "forward_qkv", "forward_scores", "forward_attention_add",
               "forward_silu", "forward_neurons", "forward_mlp_add", "forward_lens"]


@pytest.fixture(scope="module")
def app():
    """The page as the browser has it a moment after opening: its second run has built every tab."""
    return browser_idle(run_page("forward-pass", **SETTINGS), FILL)


def charts(app) -> list[str]:
    return [chart.proto.id.rsplit("-", 1)[-1] for chart in app.get("plotly_chart")]


def test_the_first_run_builds_the_live_block_and_the_browser_idle_the_tabs():
    """The page opens with the live block and no Plotly chart, data grid or tab (nothing whose code or drawing holds
    the block back); a caption says the steps are coming, and they are built once the browser has drawn the page and
    is idle."""
    opened = run_page("forward-pass", **SETTINGS)
    assert not opened.exception and not opened.error
    assert charts(opened) == [] and not opened.dataframe and not opened.tabs
    assert components(opened, "forward_live")
    assert "Drawing the steps…" in [c.value for c in opened.caption]
    browser_idle(opened, FILL)
    assert not opened.exception and charts(opened) == STEP_CHARTS and opened.dataframe
    assert [tab.label for tab in opened.tabs][:7] == ["1. RMSNorm", "2. Q, K, V and RoPE", "3. Scores and softmax",
                                                      "4. Attention output", "5. The MLP", "6. Block output",
                                                      "Logit lens"]
    assert "Drawing the steps…" not in [c.value for c in opened.caption]
    # Another token (a full run) keeps every tab: the browser told once for this visit of the page.
    component_sends(opened, "forward_live", {"view": {"layer": 2, "head": 0, "position": 3}})
    assert not opened.exception and charts(opened) == STEP_CHARTS


def test_default_view_is_the_middle_block_at_the_last_token(app, loaded, ids):
    assert not app.exception and not app.error
    trace = open_block(loaded, ids, loaded.num_layers // 2, len(ids) - 1)
    flow = block_flow(trace.block)
    shapes = app.dataframe[0].value["output shape"].tolist()
    assert shapes[0] == f"({len(ids)} x {loaded.model.config.hidden_size})"
    assert f"({loaded.model.config.num_attention_heads} x {len(ids)} x {len(ids)})" in shapes
    live = live_data(app)
    steps, heads, last = len(flow), loaded.model.config.num_attention_heads, len(ids) - 1
    assert live["start"] == {"layer": loaded.num_layers // 2, "head": 0, "position": last}
    assert live["tokens"] == [0, len(ids)]  # a short prompt: the block moves through every token in the browser
    assert not app.selectbox  # so the page has no token select of its own
    drawn = np.array([np.nan if n is None else n for n in live["step_norms"]]).reshape(len(ids), loaded.num_layers,
                                                                                         steps)
    np.testing.assert_allclose(drawn[last, loaded.num_layers // 2], [np.nan if f.norm is None else f.norm for f in flow],
                               atol=0.051, equal_nan=True)
    np.testing.assert_allclose(np.reshape(live["residual"], (len(ids), -1))[last], trace.stack.residual_norms,
                               atol=0.051)
    top = np.array(live["weights"]).reshape(len(ids), loaded.num_layers, heads, live["top"]) * live["weight_unit"]
    np.testing.assert_allclose(top[last, :, :, 0], trace.stack.head_weights.max(-1), atol=live["weight_unit"])
    first = open_block(loaded, ids, 0, 3)  # another token's keys, as opening that token gives them
    keys = np.array(live["keys"]).reshape(len(ids), loaded.num_layers, heads, live["top"])
    assert keys[3, 0, 0, 0] == int(np.argmax(first.block.weights[0]))
    weights = plotly_figure(app, "forward_scores").data[-1].y
    np.testing.assert_allclose(weights, trace.block.weights[0][-len(weights):], rtol=1e-5)


def live_data(app) -> dict:
    """What the page sent the live block (ui/live_block.js) this run."""
    (live,) = components(app, "forward_live")
    return unpacked(json.loads(live.proto.json))


def test_sentences_state_the_numbers_of_this_forward_pass(app, loaded, ids):
    """Every fact the default view writes (middle block, last token, head 0), against lifecycle's own run."""
    text = [m.replace("\\", "") for m in markdowns(app)]
    lesson, softmax, stack = (next(t for t in text if marker in t)
                              for marker in ("pass through", "Softmax turns", "The logit lens reads"))
    last, middle = len(ids) - 1, loaded.num_layers // 2
    last_token = show_token(token_text(loaded, ids[last]))
    assert f"The prompt's **{len(ids):,} tokens**" in lesson and f"**{loaded.num_layers} blocks**" in lesson
    assert f"At token '{last_token}' (position {last})" in lesson
    trace = open_block(loaded, ids, middle, last)
    norms = trace.stack.residual_norms
    assert f"from {norms[0]:,.1f} (the embedding) to {norms[-1]:,.1f} after the last block" in lesson

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


def browser_sends(app, view: dict):
    """Run the app as if the live block's controls had come to rest on ``view`` in the browser."""
    return component_sends(app, "forward_live", {"view": view})


def test_the_details_follow_the_view_the_browser_sends_and_a_token_choice(app, loaded, ids):
    """The live block sends (layer, head) when its controls rest; the page's steps then open that block."""
    browser_sends(app, {"layer": 3, "head": 4, "position": 5})
    assert not app.exception and not app.error
    trace = open_block(loaded, ids, 3, 5)
    token = show_token(token_text(loaded, ids[5]))
    assert any(f"open block **3** at head **4** for token '{token}'" in c.value.replace("\\", "") for c in app.caption)
    assert live_data(app)["start"] == {"layer": 3, "head": 4, "position": 5}
    rope = plotly_figure(app, "forward_rope")
    before = next(t for t in rope.data if t.name == "before RoPE")
    assert before.x[1] == pytest.approx(trace.block.query[4, 0], rel=1e-5)
    scores = plotly_figure(app, "forward_scores").data
    masked = next(t for t in scores if t.name == "masked (-inf)")
    assert len(masked.x) == min(4, len(ids) - 6)  # later keys shown as masked


def test_a_long_prompt_sends_a_window_of_tokens_and_keeps_a_token_select(loaded):
    """Past LIVE_TOKENS tokens the block moves through a window around the chosen token in the browser, and the
    page's own select picks any other (the payload stays bounded)."""
    prompt = "Count slowly: " + ", ".join(str(n) for n in range(1, 40)) + "."
    long_ids = render_prompt(Conversation(new_message=prompt)).ids
    assert len(long_ids) > LIVE_TOKENS
    app = run_page("forward-pass", prompt=prompt, temperature=0, max_tokens=2)
    assert not app.exception and not app.error
    live = live_data(app)
    assert live["tokens"] == [len(long_ids) - LIVE_TOKENS, len(long_ids)]
    app.selectbox(key="forward_token").set_value(3).run()
    assert not app.exception and live_data(app)["tokens"] == [0, LIVE_TOKENS]
    assert live_data(app)["start"]["position"] == 3
