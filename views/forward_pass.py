"""Forward pass page: one transformer block opened up at one token, and the residual stream through all layers.

The step-by-step tabs hold nine Plotly charts, and a browser draws a chart in a hidden tab too: drawn at once,
they made the page take over a second to open, and in a new tab any chart first waits for plotly.js (~1 s of the
browser's CPU). So the page's first run builds the live block and none of the tabs (each says "Drawing this
step…"), and the tabs' fragment reruns alone once the browser has drawn the page and is idle (ui/when_idle.py)
to build all seven: from then on a tab click is the browser's alone, with no run at all, and the RoPE slider,
always built, keeps its value.
"""

from dataclasses import dataclass

import numpy as np
import streamlit as st

from charts.attention import logit_lens_chart
from charts.embeddings import token_labels
from charts.live_block import LIVE_TOKENS, block_view_sent, live_block_data
from charts.forward_pass import (
    rope_rotation,
    scores_and_weights,
    shape_text,
    silu_neurons,
    top_neuron_bars,
    vector_rows,
)
from lifecycle.lessons.forward_pass import block_lesson
from lifecycle.stages.block import ForwardTrace, block_flow, lens_guesses, open_block, rope_pair
from lifecycle.stages.forward_pass import token_text
from lifecycle.model import LoadedModel
from lifecycle.results import shared_results
from ui.cache import per_prompt_cache, prepared_prompt
from ui.frame import lesson, loaded_model, stage_page
from ui.text import quoted
from ui.live_block import block_view, live_block
from ui.settings import JourneySettings
from ui.when_idle import idle_told, when_idle

SHOWN_DIMS = 64
KEYS_BEFORE = 40  # keys shown left of the chosen token in the score chart
KEYS_AFTER = 4  # masked keys shown right of it


LIVE_KEY = "forward_live"
POSITIONS_KEY = "forward_positions"  # the prompt's token count, for checking a view the browser sends


def follow_view() -> None:
    """The live block's controls came to rest: the step-by-step details follow its (layer, head, token)."""
    config = loaded_model().model.config
    view = block_view_sent(block_view(LIVE_KEY), config.num_hidden_layers, config.num_attention_heads,
                           st.session_state.get(POSITIONS_KEY, 0))
    if view is not None:
        st.session_state["forward_layer"], st.session_state["forward_head"], st.session_state["forward_token"] = view


@per_prompt_cache
def traced(ids: tuple[int, ...], layer: int, position: int, _loaded: LoadedModel) -> ForwardTrace:
    return open_block(_loaded, ids, layer, position)


STEPS = ("1. RMSNorm", "2. Q, K, V and RoPE", "3. Scores and softmax", "4. Attention output", "5. The MLP",
         "6. Block output", "Logit lens")
FILL_KEY = "forward_fill"  # ui.when_idle: the browser has drawn the live block: build every step tab


@dataclass(frozen=True)
class Opened:
    """What the step-by-step tabs read: one block at one token, from the hooked pass of the full run."""

    trace: ForwardTrace
    texts: list[str]
    labels: list[str]
    position: int
    layer: int
    head: int
    loaded: LoadedModel

    @property
    def flow(self):
        return block_flow(self.trace.block)


def rmsnorm_step(o: Opened) -> None:
    block, s, flow = o.trace.block, o.trace.block.shapes, o.flow
    rms = float(np.sqrt(np.mean(block.residual.astype(np.float64) ** 2)))
    st.markdown(
        f"The token's vector has root-mean-square {rms:.3f}; RMSNorm divides it by that (so the RMS becomes 1) and "
        f"multiplies each of the {s.hidden} numbers by a learned weight. Length {flow[0].norm:,.1f} becomes "
        f"{flow[1].norm:,.1f}. Every block reads a normalised copy; the stream itself is left as it is."
    )
    st.plotly_chart(vector_rows([block.residual, block.normed], ["x (block input)", "RMSNorm(x)"], SHOWN_DIMS),
                    key="forward_norm", theme=None)


def rope_step(o: Opened) -> None:
    block, s, head, position = o.trace.block, o.trace.block.shapes, o.head, o.position
    half = s.head_dim // 2
    pair = st.slider("Dimension pair", 0, half - 1, 0, key="forward_pair",
                     help=f"RoPE turns dimension i together with dimension i + {half}; low pairs turn fastest.")
    before, after, angle = rope_pair(block, head, pair)
    group = head // s.group
    st.markdown(
        f"Three matrices turn the normalised vector into a query ({s.heads} heads x {s.head_dim}), a key and a value "
        f"({s.kv_heads} heads x {s.head_dim} each: query head {head} uses key/value head {group}). Then RoPE encodes "
        f"the position: it turns each pair of query and key dimensions by an angle that grows with the position. At "
        f"position {position}, pair ({pair}, {pair + half}) turns by {position} / {s.rope_theta:,.0f}^({2 * pair}/"
        f"{s.head_dim}) = **{angle:.4f} rad**"
        + (f" ({int(angle // (2 * np.pi))} full turns and {np.degrees(angle % (2 * np.pi)):.1f}°)"
           if angle >= 2 * np.pi else f" ({np.degrees(angle):.1f}°)")
        + f". The length stays "
        f"{np.linalg.norm(before):.3f}; only the direction changes, so Q·K ends up depending on how far apart two "
        "tokens are."
    )
    st.plotly_chart(rope_rotation(before, after, angle, (pair, pair + half)), key="forward_rope", theme=None)
    st.plotly_chart(
        vector_rows([block.query[head], block.query_rotated[head], block.keys_rotated[group, position],
                     block.values[group, position]],
                    [f"q head {head}", "q after RoPE", f"k head {group} (RoPE)", f"v head {group}"], s.head_dim),
        key="forward_qkv", theme=None)


def scores_step(o: Opened) -> None:
    block, s, head, position, texts, labels = (o.trace.block, o.trace.block.shapes, o.head, o.position, o.texts,
                                               o.labels)
    row, weights = block.scores[head], block.weights[head]
    start, stop = max(0, position - KEYS_BEFORE), min(s.positions, position + 1 + KEYS_AFTER)
    top_key = int(np.argmax(weights))
    st.markdown(
        f"Head {head}'s query is compared with the key of every token: the dot product, divided by "
        f"√{s.head_dim} = {np.sqrt(s.head_dim):.0f} so the scores stay in a range softmax handles well. Keys after "
        f"position {position} are masked (score −∞), so a token never sees the future: "
        + (f"{s.positions - position - 1} of {s.positions} keys are masked here. " if position < s.positions - 1 else
           "this is the last token, so nothing is masked (pick an earlier token to see the mask). ")
        + f"Softmax turns the {position + 1} visible scores into weights that "
        f"sum to 1; the largest, {weights[top_key]:.1%}, goes to {quoted(texts[top_key])} (position {top_key})."
    )
    st.plotly_chart(scores_and_weights(row[start:stop], weights[start:stop], labels[start:stop]),
                    key="forward_scores", theme=None)
    if start > 0:
        st.caption(f"Showing keys {start}–{stop - 1} of 0–{s.positions - 1}.")


def attention_step(o: Opened) -> None:
    block, s, flow = o.trace.block, o.trace.block.shapes, o.flow
    st.markdown(
        f"Each head sums the value vectors with those weights ({s.head_dim} numbers per head); the {s.heads} heads "
        f"side by side ({s.heads * s.head_dim} numbers) go through the output projection back to {s.hidden}. That "
        f"update has length {flow[8].norm:,.1f} and is **added** to the stream (length {flow[0].norm:,.1f}), giving "
        f"{flow[9].norm:,.1f}."
    )
    st.plotly_chart(vector_rows([block.residual, block.attention_out, block.after_attention],
                                ["x", "attention output", "x + attention"], SHOWN_DIMS),
                    key="forward_attention_add", theme=None)


def mlp_step(o: Opened) -> None:
    block, s = o.trace.block, o.trace.block.shapes
    neurons = block.top_neurons()
    firing = int((np.abs(block.product) > 0.1 * np.abs(block.product).max()).sum())
    strongest = int(neurons[0])
    st.markdown(
        f"After a second RMSNorm, two projections widen the vector to {s.intermediate:,} numbers: a *gate* and an "
        f"*up* value per neuron. SiLU(gate) lets a neuron through when its gate is positive and nearly silences it "
        f"when negative; multiplied by *up*, it decides how much of that neuron's output direction the *down* "
        f"projection writes back ({s.hidden} numbers). For this token, {firing:,} of {s.intermediate:,} neurons reach "
        f"at least a tenth of the strongest; neuron **{strongest}** fires most (gate {block.gate[strongest]:.2f}, "
        f"SiLU {block.activated[strongest]:.2f} x up {block.up[strongest]:.2f} = {block.product[strongest]:.2f})."
    )
    st.plotly_chart(silu_neurons(block.gate, block.activated, neurons[:4]), key="forward_silu", theme=None)
    st.plotly_chart(top_neuron_bars(neurons, block.activated, block.up, block.product),
                    key="forward_neurons", theme=None)


def output_step(o: Opened) -> None:
    block, flow, layer, layers = o.trace.block, o.flow, o.layer, o.trace.block.shapes.layers
    st.markdown(
        f"The MLP's output (length {flow[13].norm:,.1f}) is added to the stream ({flow[9].norm:,.1f}), giving the "
        f"block's output ({flow[14].norm:,.1f}): the input of block {layer + 1}"
        + (" (the last block's output goes to the final norm and the output head)." if layer == layers - 1 else ".")
    )
    st.plotly_chart(vector_rows([block.after_attention, block.mlp_out, block.output],
                                ["x + attention", "MLP output", "block output"], SHOWN_DIMS),
                    key="forward_mlp_add", theme=None)


def lens_step(o: Opened) -> None:
    stack, loaded, layers = o.trace.stack, o.loaded, o.trace.block.shapes.layers
    guesses = lens_guesses(stack, lambda i: token_text(loaded, i))
    final_text = token_text(loaded, stack.final_id)
    settle = stack.settles_at
    st.markdown(
        f"Each layer adds its attention and MLP outputs to the stream; no layer replaces it. The logit lens "
        f"reads each layer's output as if it were the last: the model's answer after this token is "
        f"{quoted(final_text)}, and it is "
        + (f"the lens's top guess from layer {settle} on." if settle < layers - 1
           else "the top guess only at the very last layer.")
    )
    st.plotly_chart(logit_lens_chart([g[0] for g in guesses], [g[1][0].text for g in guesses],
                                     [g[1][0].probability for g in guesses], final_text),
                    key="forward_lens", theme=None)
    st.caption("Green bars: the layer's top guess already equals the final answer.")


VIEWS = dict(zip(STEPS, (rmsnorm_step, rope_step, scores_step, attention_step, mlp_step, output_step, lens_step)))


def shapes(o: Opened) -> None:
    """Every step's output shape, in an expander."""
    flow, positions = o.flow, o.trace.block.shapes.positions
    with st.expander(f"Shapes for this prompt ({positions:,} tokens), read from the model's config"):
        st.dataframe({"step": [f.name for f in flow], "output shape": [shape_text(f.shape) for f in flow]},
                     hide_index=True, height=35 * (len(flow) + 1) + 3)
        st.caption("Each step hands on one tensor for the whole prompt; above, ‖·‖ is the length (L2 norm) of the "
                   "chosen token's row after the step. The green steps are the residual adds (the skip connections): "
                   "the stream itself.")


@st.fragment
def steps(opened: Opened) -> None:
    """The shapes and the step-by-step tabs. A page's first run builds none of them (a caption holds their place),
    so a new tab draws the live block above without waiting for plotly.js (~1 s of the browser's CPU for its first
    chart), a data grid's code, or the tabs (~60 ms of a new tab's picture, measured); once the browser has drawn the
    page and is idle, this fragment reruns alone and builds every tab, so from then on a tab click is the
    browser's alone (no run)."""
    if idle_told(FILL_KEY):
        shapes(opened)
        for tab, draw in zip(st.tabs(STEPS), VIEWS.values()):
            with tab:
                draw(opened)
    else:
        st.caption("Drawing the steps…")
    when_idle(FILL_KEY)


@per_prompt_cache
def live_data(ids: tuple[int, ...], layer: int, head: int, position: int, _loaded: LoadedModel) -> dict:
    """The live block's data for this view, built and encoded once for every session that opens it."""
    trace = traced(ids, layer, position, _loaded)
    stack, flow = trace.stack, block_flow(trace.block)
    labels = token_labels([token_text(_loaded, i) for i in ids])
    return live_block_data([f.name for f in flow], [f.shape for f in flow], stack.step_norms_by_token, stack.top_keys,
                           stack.top_weights, stack.residual_norms_by_token, stack.attention_norms_by_token,
                           stack.mlp_norms_by_token, labels, trace.block.shapes.group, (layer, head, position))


def _opening(tokens: int, layers: int) -> tuple[int, int]:
    """The layer and token position the page opens at: the middle layer, the prompt's last token."""
    return layers // 2, tokens - 1


def prepare(settings: JourneySettings, loaded: LoadedModel) -> None:
    """What this page computes for ``settings`` as it opens (the traced pass and the live block's data built from
    it, at head 0), into the shared cache."""
    ids = tuple(shared_results(loaded).prepared(settings.journey_input()).rendered.ids)
    layer, position = _opening(len(ids), loaded.model.config.num_hidden_layers)
    live_data(ids, layer, 0, position, loaded)


def render() -> None:
    with stage_page("forward-pass") as settings:
        loaded = loaded_model()
        ids = prepared_prompt(settings).rendered.ids
        texts = [token_text(loaded, i) for i in ids]
        labels = token_labels(texts)
        config = loaded.model.config
        layers = config.num_hidden_layers

        first_layer, last_token = _opening(len(ids), layers)
        position = int(st.session_state.get("forward_token", last_token))
        position = position if 0 <= position < len(ids) else last_token
        layer = int(st.session_state.setdefault("forward_layer", first_layer))
        head = int(st.session_state.setdefault("forward_head", 0))
        with st.spinner("Running the prompt once more with hooks on every module…", show_time=True):
            trace = traced(tuple(ids), layer, position, loaded)
        stack, s = trace.stack, trace.block.shapes
        lesson(block_lesson(s.positions, s.layers, quoted(texts[position]), position, stack.residual_norms,
                            stack.attention_norms, stack.mlp_norms))
        st.session_state[POSITIONS_KEY] = len(ids)
        live_block(live_data(tuple(ids), layer, head, position, loaded), key=LIVE_KEY, on_view=follow_view)
        st.caption(f"Moving the layer, the head or the token redraws the block above in your browser. The steps below "
                   f"open block **{layer}** at head **{head}** for token {quoted(texts[position])}; they follow once "
                   "the controls rest (one more hooked pass).")
        if len(ids) > LIVE_TOKENS:
            st.selectbox("Token", range(len(ids)), index=position, format_func=lambda i: labels[i], key="forward_token",
                         help=f"The block above moves through {LIVE_TOKENS} of the prompt's {len(ids):,} tokens, around "
                              "this one; pick another here to move them.")
        steps(Opened(trace, texts, labels, position, layer, head, loaded))
