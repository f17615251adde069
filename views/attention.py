"""Attention page: attention weights per layer and head, and the logit lens across layers.

The live maps (ui.live_attention) are the picture; the tabs under them (Plotly charts, a data grid) come in the
run after the maps are drawn (ui.when_idle), so a new tab does not wait for plotly.js. That first run sends the maps
of the layer shown alone; every layer comes with the tabs.
"""

import numpy as np
import streamlit as st

from lifecycle.stages.vocabulary import show_token

from charts.attention import attention_bars, attention_heatmap, attention_mosaic, logit_lens_chart
from charts.embeddings import token_labels
from charts.live_attention import attention_focus, live_attention_data, live_limit_note, picture_only
from lifecycle.lessons.attention import attention_lesson
from lifecycle.journey import Inspection
from lifecycle.stages.forward_pass import ForwardPass, run_forward, token_text
from ui.frame import lesson, loaded_model, stage_page
from ui.tables import fitted_table
from ui.cache import inspected_prompt
from ui.text import quoted
from ui.live_attention import live_attention_maps
from ui.when_idle import details_ready, idle_told

DETAILS = "attention_details"  # ui.when_idle: the tabs come once the live maps are drawn
PRONOUN_SENTENCE = "The programmer fixed the bug because it caused crashes."
PRONOUN, ANTECEDENT = " it", " bug"


@st.cache_resource(max_entries=1, show_spinner="Running the pronoun example through the model…")
def pronoun_pass() -> tuple[ForwardPass, list[str]]:
    """The example sentence alone (no chat template), every layer's attention."""
    loaded = loaded_model()
    with loaded.tokenizer_lock:
        ids = loaded.tokenizer.encode(PRONOUN_SENTENCE, add_special_tokens=False)
    return run_forward(loaded, ids), [token_text(loaded, i) for i in ids]


def use_pronoun_example() -> None:
    st.session_state["prompt"] = PRONOUN_SENTENCE


def strongest_head(forward: ForwardPass, query: int, key: int) -> tuple[int, int, float]:
    """(layer, head, weight) of the head where ``query`` attends most to ``key``."""
    layer, head, weight = max(
        ((layer, head, float(weights[head, query, key])) for layer, weights in forward.attentions.items()
         for head in range(weights.shape[0])),
        key=lambda found: found[2],
    )
    return layer, head, weight


def render() -> None:
    with stage_page("attention") as settings:
        _, inspection = inspected_prompt(settings)
        loaded = loaded_model()
        config = loaded.model.config
        forward = inspection.forward
        offset = forward.attention_offset
        texts = [token_text(loaded, i) for i in forward.ids]
        labels = token_labels(texts[offset:], start=offset)
        stacked = np.stack([forward.attentions[layer] for layer in sorted(forward.attentions)])
        focus = attention_focus(stacked)
        group = config.num_attention_heads // config.num_key_value_heads
        lesson(attention_lesson(focus, len(forward.ids), quoted(texts[offset]), quoted(texts[-1]),
                                quoted(texts[offset + focus.key])))
        data = live_attention_data(forward.attentions, labels, len(forward.ids), group, (focus.layer, focus.head))
        live_attention_maps(data if idle_told(DETAILS) else picture_only(data), key="attention_live")
        notes = [note for note in (forward.attention_note, live_limit_note(data)) if note]
        if notes:
            st.info(" ".join(notes), icon=":material/content_cut:")
        with st.expander("How attention works in this model"):
            st.markdown(
                f"In each of its **{config.num_hidden_layers} layers**, **{config.num_attention_heads} attention heads** "
                f"let every token gather information from itself and the tokens before it (never after). The heads "
                f"share {config.num_key_value_heads} sets of keys and values, {group} query heads per set (grouped-query "
                f"attention, which shrinks the KV cache {group}x). Position enters here: queries and keys are rotated by "
                "their position (RoPE) before they are compared. The first token is a resting place heads use when "
                "nothing else is relevant. Pick a layer, a head (or their mean) and a query token above, or click a row "
                "of the map: the map and the bars are redrawn in your browser from weights sent once "
                f"({data['bytes'] / 1024:,.0f} KiB for this prompt)."
            )

        if details_ready(DETAILS):
            _tabs(forward, stacked, inspection, config.num_attention_heads)


def _tabs(forward: ForwardPass, stacked: np.ndarray, inspection: Inspection, heads: int) -> None:
    """Every head at once, the pronoun example and the logit lens, in tabs under the live maps."""
    mosaic_tab, pronoun_tab, lens_tab = st.tabs([
        f"All {len(stacked)} layers x {stacked.shape[1]} heads", "Does a pronoun find its noun?",
        "Logit lens: each layer's guess"])
    with mosaic_tab:
        st.plotly_chart(attention_mosaic(forward.attentions), key="attention_mosaic", theme=None)
        st.caption("Each tile is one head's query x key map (query down, key across), averaged down to at most "
                   "24 x 24 cells. A bright left edge is attention to the first token, a bright diagonal a head "
                   "looking at the token itself or its neighbour. Colours follow the square root of the weight, so "
                   "small weights stay visible.")

    with pronoun_tab:
        example, example_texts = pronoun_pass()
        it = example_texts.index(PRONOUN)
        noun = example_texts.index(ANTECEDENT)
        ex_layer, ex_head, ex_weight = strongest_head(example, it, noun)
        ex_labels = token_labels(example_texts)
        st.markdown(
            f"Computed on the sentence alone (no chat template), whatever the sidebar prompt: in **layer {ex_layer}, "
            f"head {ex_head}**, the token {quoted(PRONOUN)} puts **{ex_weight:.0%}** of its attention on {quoted(ANTECEDENT)}, "
            f"the noun it refers to: the strongest such head of all "
            f"{len(example.attentions) * heads}. The outlined row is the pronoun's."
        )
        st.text(PRONOUN_SENTENCE)
        ex_left, ex_right = st.container(), st.container()  # one under the other, full width
        ex_left.plotly_chart(attention_heatmap(example.attentions[ex_layer][ex_head], ex_labels,
                                               f"Layer {ex_layer}, head {ex_head}", it), key="pronoun_map", theme=None)
        ex_right.plotly_chart(attention_bars(example.attentions[ex_layer][ex_head, it], ex_labels, it),
                              key="pronoun_bars", theme=None)
        st.button("Use the pronoun example as the prompt", on_click=use_pronoun_example, key="pronoun_button",
                  help="Sets the sidebar prompt to this sentence, so every page follows it (inside the chat template).")

    with lens_tab:
        final = inspection.next_token.top(1)[0]
        lens = forward.logit_lens
        first_right = next((g.layer for g in lens if g.candidates[0].id == final.id), None)
        st.markdown(
            f"Push each layer's hidden state at the last position through the final norm and the output head, as "
            f"if the model stopped there. The full model's answer is {quoted(final.text)} ({final.probability:.0%}); "
            + (f"it first comes out on top at layer {first_right} of 0-{len(lens) - 1}. " if first_right is not None
               else "")
            + "The last layer's guess is the model's answer: it is the same computation."
        )
        st.plotly_chart(
            logit_lens_chart([g.layer for g in lens], [g.candidates[0].text for g in lens],
                             [g.candidates[0].probability for g in lens], final.text),
            key="logit_lens", theme=None
        )
        fitted_table(
            {
                "layer": [g.layer for g in lens],
                "top guess": [show_token(g.candidates[0].text) for g in lens],
                "probability": [round(g.candidates[0].probability, 4) for g in lens],
                "runners-up": [", ".join(show_token(c.text) for c in g.candidates[1:4]) for g in lens],
                "entropy (bits)": [round(g.entropy_bits, 2) for g in lens],
            },
            {"layer": "layer", "top guess": "top guess", "probability": "probability", "entropy (bits)": "bits"},
            key="logit_lens_table", full_from=420, hide_index=True,
            narrow_widths={"layer": 50, "top guess": 120, "probability": 90, "bits": 60},
        )
